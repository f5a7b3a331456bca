// Runs with the npm package rocketmq-client-nodejs (NODE_PATH names its node_modules): a round trip
// through rocketq's gRPC proxy.  A SimpleConsumer starts (one empty receive fixes its start offset),
// a Producer sends a normal message (tag, key, property), two FIFO messages of group "g1" and one
// delay message (2 s); the consumer receives all four, acks three and changes the invisible
// duration of the normal one to 1 s, which then comes back (delivery attempt 2) and is acked.
// Usage: node node_sdk_roundtrip.js PROXY_ADDR TOPIC GROUP  -> prints one JSON line
const { Producer, SimpleConsumer } = require('rocketmq-client-nodejs');

async function main() {
  const [endpoints, topic, group] = process.argv.slice(2);
  const out = { sent: [], received: [], redelivered: [] };
  const consumer = new SimpleConsumer({
    endpoints, consumerGroup: group, subscriptions: new Map([[topic, '*']]), awaitDuration: 2000, requestTimeout: 5000,
  });
  await consumer.startup();
  await consumer.receive(16, 15000); // fixes the group's start offset
  const producer = new Producer({ endpoints, topics: [topic], requestTimeout: 5000 });
  await producer.startup();
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
    body: m.body.toString(), id: m.messageId, tag: m.tag, keys: m.keys, group: m.messageGroup ?? null,
    attempt: m.deliveryAttempt, props: Object.fromEntries(m.properties ?? []),
  });
  const seen = new Set();
  const deadline = Date.now() + 40000;
  while ((seen.size < plan.length || out.redelivered.length === 0) && Date.now() < deadline) {
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
  await producer.shutdown();
  await consumer.shutdown();
  console.log(JSON.stringify(out));
}

main().then(() => process.exit(0), (err) => { console.error(err); process.exit(1); });
