// Runs with the npm package rocketmq-client-nodejs (NODE_PATH names its node_modules): a round trip
// through rocketq's gRPC proxy.  A SimpleConsumer starts (one empty receive fixes its start offset),
// a Producer sends a normal message (tag, key, property), two FIFO messages of group "g1" and one
// delay message (2 s); the consumer receives all four, acks three and changes the invisible
// duration of the normal one to 1 s, which then comes back (delivery attempt 2) and is acked.
// Then one more message is received with a 3 s invisible duration and left alone: it comes back
// (delivery attempt 2) after those 3 s and is acked.  Every wait is bounded.
// The consumer subscribes to CROSS_IN too, where a remoting producer sent N_CROSS_IN messages.
// Usage: node node_sdk_roundtrip.js PROXY_ADDR TOPIC GROUP CROSS_IN N_CROSS_IN  -> prints one JSON line
const { Producer, SimpleConsumer } = require('rocketmq-client-nodejs');
const { start } = require('./node_start.js');

async function main() {
  const [endpoints, topic, group, crossIn, nCrossIn] = process.argv.slice(2);
  const out = { sent: [], received: [], redelivered: [] };
  const consumer = new SimpleConsumer({
    endpoints, consumerGroup: group, subscriptions: new Map([[topic, '*'], [crossIn, '*']]), awaitDuration: 2000, requestTimeout: 5000,
  });
  await start(consumer, 'consumer');
  await consumer.receive(16, 15000); // fixes the group's start offset
  const producer = new Producer({ endpoints, topics: [topic], requestTimeout: 5000 });
  await start(producer, 'producer');
  const plan = [
    { topic, tag: 'TagN', keys: ['n0'], body: Buffer.from('node-normal'), properties: new Map([['p', '1']]) },
    { topic, tag: 'TagF', messageGroup: 'g1', body: Buffer.from('node-fifo-0') },
    { topic, tag: 'TagF', messageGroup: 'g1', body: Buffer.from('node-fifo-1') },
    { topic, tag: 'TagD', delay: 2000, body: Buffer.from('node-delay') },
  ];
  for (const m of plan) {
    const receipt = await producer.send(m);
    out.sent.push({ body: m.body.toString(), id: receipt.messageId });
  }
  const view = (m) => ({
    body: m.body.toString(), id: m.messageId, topic: m.topic, tag: m.tag, keys: m.keys, group: m.messageGroup ?? null,
    attempt: m.deliveryAttempt, props: Object.fromEntries(m.properties ?? []),
  });
  const seen = new Set();
  const deadline = Date.now() + 40000;
  const want = plan.length + Number(nCrossIn);
  while ((seen.size < want || out.redelivered.length === 0) && Date.now() < deadline) {
    for (const m of await consumer.receive(16, 15000)) {
      const body = m.body.toString();
      if (seen.has(body)) {
        out.redelivered.push(view(m));
        await consumer.ack(m);
        continue;
      }
      seen.add(body);
      out.received.push(view(m));
      if (body === 'node-normal') {
        await consumer.changeInvisibleDuration(m, 1000);
      } else {
        await consumer.ack(m);
      }
    }
  }
  // received, neither acked nor changed: it comes back once its invisible duration (3 s) is over
  const unacked = await producer.send({ topic, tag: 'TagU', body: Buffer.from('node-unacked') });
  out.unacked = { id: unacked.messageId, deliveries: [] };
  const until = Date.now() + 30000;
  while (out.unacked.deliveries.length < 2 && Date.now() < until) {
    for (const m of await consumer.receive(16, 3000)) {
      out.unacked.deliveries.push({ ...view(m), at_ms: Date.now() });
      if (out.unacked.deliveries.length >= 2) await consumer.ack(m);
    }
  }
  await producer.shutdown();
  await consumer.shutdown();
  console.log(JSON.stringify(out));
}

main().then(() => process.exit(0), (err) => { console.error(err); process.exit(1); });
