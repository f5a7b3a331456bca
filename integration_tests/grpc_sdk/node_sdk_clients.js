// Runs with the npm package rocketmq-client-nodejs (NODE_PATH names its node_modules): a
// SimpleConsumer that stays connected to rocketq's gRPC proxy until a line "shutdown" on stdin, so
// the test can ask it for its thread stacks through a broker (mqadmin consumerStatus -s).
// Usage: node node_sdk_clients.js PROXY_ADDR TOPIC GROUP  -> prints {"consumer": clientId}, then
// "stopped" after the shutdown.
const readline = require('node:readline');
const { SimpleConsumer } = require('rocketmq-client-nodejs');
const { start } = require('./node_start.js');

async function main() {
  const [endpoints, topic, group] = process.argv.slice(2);
  const consumer = new SimpleConsumer({
    endpoints, consumerGroup: group, subscriptions: new Map([[topic, '*']]), awaitDuration: 1000, requestTimeout: 5000,
  });
  await start(consumer, 'consumer');
  await consumer.receive(16, 15000);
  console.log(JSON.stringify({ consumer: consumer.clientId }));
  const lines = readline.createInterface({ input: process.stdin });
  for await (const line of lines) {
    if (line.trim() === 'shutdown') break;
  }
  await consumer.shutdown();
  console.log('stopped');
  process.exit(0);
}

main().catch((e) => { console.error(e); process.exit(1); });
