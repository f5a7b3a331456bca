// Runs with the npm package rocketmq-client-nodejs (NODE_PATH names its node_modules): a PushConsumer
// through rocketq's gRPC proxy.  The consumer of GROUP starts, a Producer sends "push-ok-0",
// "push-ok-1", "push-retry" and "push-dead".  The listener returns SUCCESS, except for push-retry
// at its first delivery and for push-dead at every delivery (FAILURE: the SDK makes the message
// invisible again and it comes back with the next delivery attempt).  Once the ok messages came,
// push-retry came back and push-dead came MAX_ATTEMPTS times, the line PHASE=consumed is printed; the consumer keeps running (its receives are what moves push-dead to %DLQ%GROUP)
// until a line arrives on stdin or LINGER_MS passed, then it shuts down and prints the final JSON
// line with every delivery.  Every wait is bounded.
// Usage: node node_sdk_push.js PROXY_ADDR TOPIC GROUP MAX_ATTEMPTS LINGER_MS
const readline = require('node:readline');
const { ConsumeResult, Producer, PushConsumer } = require('rocketmq-client-nodejs');
const { start } = require('./node_start.js');

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function main() {
  const [endpoints, topic, group, maxAttemptsArg, lingerArg] = process.argv.slice(2);
  const maxAttempts = Number(maxAttemptsArg);
  const out = { sent: {}, deliveries: [] };
  const listener = {
    consume(view) {
      const body = view.body.toString();
      out.deliveries.push({
        body, id: view.messageId, attempt: view.deliveryAttempt, tag: view.tag, keys: view.keys, at_ms: Date.now(),
      });
      const fail = body === 'push-dead' || (body === 'push-retry' && view.deliveryAttempt === 1);
      return fail ? ConsumeResult.FAILURE : ConsumeResult.SUCCESS;
    },
  };
  const consumer = new PushConsumer({
    endpoints, consumerGroup: group, subscriptions: new Map([[topic, '*']]), messageListener: listener,
    requestTimeout: 5000,
  });
  await start(consumer, 'consumer');
  const producer = new Producer({ endpoints, topics: [topic], requestTimeout: 5000 });
  await start(producer, 'producer');
  await sleep(2000); // the consumer's first assignment scan (1 s after its start) begins its receives
  for (const body of ['push-ok-0', 'push-ok-1', 'push-retry', 'push-dead']) {
    const receipt = await producer.send({ topic, tag: 'TagP', keys: [body], body: Buffer.from(body) });
    out.sent[body] = receipt.messageId;
  }
  await producer.shutdown();
  const count = (body) => out.deliveries.filter((d) => d.body === body).length;
  const deadline = Date.now() + 60000;
  while (Date.now() < deadline
    && !(count('push-ok-0') && count('push-ok-1') && count('push-retry') >= 2 && count('push-dead') >= maxAttempts)) {
    await sleep(200);
  }
  console.log('PHASE=consumed');
  const lines = readline.createInterface({ input: process.stdin });
  await Promise.race([new Promise((resolve) => lines.once('line', resolve)), sleep(Number(lingerArg))]);
  lines.close();
  await consumer.shutdown();
  console.log(JSON.stringify(out));
}

main().then(() => process.exit(0), (err) => { console.error(err); process.exit(1); });
