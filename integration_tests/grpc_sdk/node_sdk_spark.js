// Runs with the npm package rocketmq-client-nodejs (NODE_PATH names its node_modules): the Node.js
// SDK's half of the hand-over with the Spark connector, through rocketq's gRPC proxy.
// "produce" sends three normal messages ("sdk-normal-<i>", tag TagS, keys "ka-<i>" and "kb-<i>",
// property p=<i>) and eight FIFO messages of message groups G1 and G2 sent in turn ("fifo-G1-0",
// "fifo-G2-0", ... tag TagF) and prints {"sent": [{"body", "id"}, ...]}.
// "consume" starts a SimpleConsumer of GROUP on TOPIC (one receive fixes its start offsets),
// prints the line PHASE=ready, waits for a line on stdin (at most 120 s), receives and acks until
// N messages came (at most 60 s), receives once more (nothing acked comes back) and prints
// {"received": [...], "late": [...]} as the last line.
// Usage: node node_sdk_spark.js produce PROXY_ADDR TOPIC
//        node node_sdk_spark.js consume PROXY_ADDR TOPIC GROUP N
const readline = require('node:readline');
const { Producer, SimpleConsumer } = require('rocketmq-client-nodejs');
const { start } = require('./node_start.js');

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function produce(endpoints, topic) {
  const producer = new Producer({ endpoints, topics: [topic], requestTimeout: 5000 });
  await start(producer, 'producer');
  const plan = [];
  for (let i = 0; i < 3; i++) {
    plan.push({
      topic, tag: 'TagS', keys: [`ka-${i}`, `kb-${i}`], body: Buffer.from(`sdk-normal-${i}`),
      properties: new Map([['p', String(i)]]),
    });
  }
  for (let i = 0; i < 4; i++) {
    for (const group of ['G1', 'G2']) {
      plan.push({ topic, tag: 'TagF', messageGroup: group, body: Buffer.from(`fifo-${group}-${i}`) });
    }
  }
  const sent = [];
  for (const m of plan) {
    sent.push({ body: m.body.toString(), id: (await producer.send(m)).messageId });
  }
  await producer.shutdown();
  console.log(JSON.stringify({ sent }));
}

async function consume(endpoints, topic, group, n) {
  const consumer = new SimpleConsumer({
    endpoints, consumerGroup: group, subscriptions: new Map([[topic, '*']]), awaitDuration: 2000, requestTimeout: 5000,
  });
  await start(consumer, 'consumer');
  await consumer.receive(16, 15000); // fixes the group's start offsets
  console.log('PHASE=ready');
  const lines = readline.createInterface({ input: process.stdin });
  await Promise.race([new Promise((resolve) => lines.once('line', resolve)), sleep(120000)]);
  lines.close();
  const view = (m) => ({
    body: m.body.toString(), id: m.messageId, tag: m.tag, keys: [...m.keys].sort(),
    props: Object.fromEntries(m.properties ?? []), attempt: m.deliveryAttempt,
  });
  const received = [];
  const deadline = Date.now() + 60000;
  while (received.length < n && Date.now() < deadline) {
    for (const m of await consumer.receive(16, 15000)) {
      received.push(view(m));
      await consumer.ack(m);
    }
  }
  const late = (await consumer.receive(16, 15000)).map(view);
  await consumer.shutdown();
  console.log(JSON.stringify({ received, late }));
}

async function main() {
  const [mode, endpoints, topic, group, n] = process.argv.slice(2);
  if (mode === 'produce') {
    await produce(endpoints, topic);
  } else {
    await consume(endpoints, topic, group, Number(n));
  }
}

main().then(() => process.exit(0), (err) => { console.error(err); process.exit(1); });
