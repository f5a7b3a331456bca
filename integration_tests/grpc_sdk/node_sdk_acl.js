// Runs with the npm package rocketmq-client-nodejs (NODE_PATH names its node_modules): 5.x
// credentials against rocketq's gRPC proxy with enableACL, over TLS (sslEnabled: the certificate is
// checked against the roots named by GRPC_DEFAULT_SSL_ROOTS_FILE_PATH) or in plaintext.
// CASES_JSON maps a case name to [accessKey, secretKey] ("" and "": no sessionCredentials).  For
// each case a SimpleConsumer of GROUP subscribes to TOPIC (one receive), a Producer sends one
// message ("acl-<case>") and the consumer receives; each step's result is its value or the error
// the SDK raised, each bounded in time (the SDK's startup waits for the server's Settings).
// Usage: node node_sdk_acl.js PROXY_ADDR TOPIC GROUP CASES_JSON tls|plain  -> prints one JSON line
const { Producer, SimpleConsumer } = require('rocketmq-client-nodejs');

const STEP_MS = 20000;

async function attempt(fn) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${STEP_MS} ms`)), STEP_MS);
  });
  try {
    return { ok: true, value: await Promise.race([fn(), timeout]) };
  } catch (err) {
    return { ok: false, error: `${err.code ?? ''} ${err.message ?? err}`.trim() };
  } finally {
    clearTimeout(timer);
  }
}

async function runCase(endpoints, topic, group, name, [accessKey, accessSecret], sslEnabled) {
  const common = { endpoints, sslEnabled, requestTimeout: 5000 };
  if (accessKey) common.sessionCredentials = { accessKey, accessSecret };
  const out = {};
  const consumer = new SimpleConsumer({
    ...common, consumerGroup: group, subscriptions: new Map([[topic, '*']]), awaitDuration: 1000,
  });
  out.subscribe = await attempt(async () => {
    await consumer.startup();
    return (await consumer.receive(16, 15000)).length; // fixes the group's start offsets
  });
  const producer = new Producer({ ...common, topics: [topic] });
  out.send = await attempt(async () => {
    await producer.startup();
    return (await producer.send({ topic, body: Buffer.from(`acl-${name}`) })).messageId;
  });
  await attempt(() => producer.shutdown());
  out.receive = await attempt(async () => {
    const got = [];
    for (let i = 0; i < 5 && got.length === 0; i++) {
      for (const m of await consumer.receive(16, 15000)) {
        await consumer.ack(m);
        got.push(m.body.toString());
      }
    }
    return got;
  });
  await attempt(() => consumer.shutdown());
  return out;
}

async function main() {
  const [endpoints, topic, group, casesJson, mode] = process.argv.slice(2);
  const out = {};
  for (const [name, credentials] of Object.entries(JSON.parse(casesJson))) {
    out[name] = await runCase(endpoints, topic, group, name, credentials, mode === 'tls');
  }
  console.log(JSON.stringify(out));
}

main().then(() => process.exit(0), (err) => { console.error(err); process.exit(1); });
