// Runs with the npm package rocketmq-client-nodejs (NODE_PATH names its node_modules): transactions
// through rocketq's gRPC proxy.  A SimpleConsumer starts (one empty receive fixes its start offset);
// a Producer with a TransactionChecker sends three transactional messages: one committed, one
// rolled back, and one left open, which the broker checks back through the proxy's Telemetry
// stream and the checker commits.  The consumer receives until the two committed messages came,
// then once more (the rolled-back one must never come).  Every wait is bounded.
// Usage: node node_sdk_transaction.js PROXY_ADDR TOPIC GROUP  -> prints one JSON line
const { Producer, SimpleConsumer } = require('rocketmq-client-nodejs');
const { start } = require('./node_start.js');
const { TransactionResolution } = require('rocketmq-client-nodejs/proto/apache/rocketmq/v2/definition_pb');

async function main() {
  const [endpoints, topic, group] = process.argv.slice(2);
  const out = { sent: {}, received: [], checked: [] };
  const consumer = new SimpleConsumer({
    endpoints, consumerGroup: group, subscriptions: new Map([[topic, '*']]), awaitDuration: 2000, requestTimeout: 5000,
  });
  await start(consumer, 'consumer');
  await consumer.receive(16, 15000); // fixes the group's start offset
  const checker = {
    async check(view) {
      const body = view.body.toString();
      out.checked.push({ body, id: view.messageId, topic: view.topic });
      return body === 'node-tx-orphan' ? TransactionResolution.COMMIT : TransactionResolution.ROLLBACK;
    },
  };
  const producer = new Producer({ endpoints, topics: [topic], requestTimeout: 5000, checker });
  await start(producer, 'producer');
  for (const [body, end] of [['node-tx-commit', 'commit'], ['node-tx-rollback', 'rollback'], ['node-tx-orphan', null]]) {
    const transaction = producer.beginTransaction();
    const receipt = await producer.send({ topic, tag: 'TagT', keys: [body], body: Buffer.from(body) }, transaction);
    out.sent[body] = receipt.messageId;
    if (end === 'commit') await transaction.commit();
    if (end === 'rollback') await transaction.rollback();
  }
  const seen = new Set();
  const deadline = Date.now() + 45000;
  let extraRounds = 1; // one more receive after both committed messages came
  while (Date.now() < deadline && (seen.size < 2 || out.checked.length === 0 || extraRounds-- > 0)) {
    for (const m of await consumer.receive(16, 15000)) {
      const body = m.body.toString();
      seen.add(body);
      out.received.push({ body, id: m.messageId, topic: m.topic, tag: m.tag, keys: m.keys });
      await consumer.ack(m);
    }
  }
  await producer.shutdown();
  await consumer.shutdown();
  console.log(JSON.stringify(out));
}

main().then(() => process.exit(0), (err) => { console.error(err); process.exit(1); });
