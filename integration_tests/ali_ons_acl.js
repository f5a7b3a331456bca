// ali-ons (npm) against rocketq with ACL on: produce N messages and consume them back.
// Usage: node ali_ons_acl.js <nameSrv> <topic> <group> <accessKey> <secretKey> <count>
// Prints one JSON line {"sent": n, "received": [bodies...]} or {"error": "..."}; exits 0/1.
'use strict';

const { Producer, Consumer, Message } = require('ali-ons');

const [nameSrv, topic, group, accessKey, secretKey, countText] = process.argv.slice(2);
const count = Number(countText);
const common = { nameSrv, accessKey, secretKey, onsChannel: 'LOCAL', persistent: false };
const httpclient = { request: async () => { throw new Error('no HTTP lookup: nameSrv is given'); } };

function sleep(ms) { return new Promise(resolve => setTimeout(resolve, ms)); }

async function main() {
  const received = new Set();
  const consumer = new Consumer({ ...common, httpclient, consumerGroup: group,
    consumeFromWhere: 'CONSUME_FROM_FIRST_OFFSET', pullInterval: 100 });
  consumer.on('error', err => console.error('consumer error', err.message));
  consumer.subscribe(topic, '*', async msg => { received.add(msg.body.toString()); });
  await consumer.ready();

  const producer = new Producer({ ...common, httpclient, producerGroup: `${group}-producer` });
  producer.on('error', err => console.error('producer error', err.message));
  await producer.ready();
  let sent = 0;
  for (let i = 0; i < count; i++) {
    const result = await producer.send(new Message(topic, 'TagA', `ons-${i}`));
    if (result.sendStatus === 'SEND_OK') sent++;
  }
  const deadline = Date.now() + 60000;
  while (received.size < count && Date.now() < deadline) await sleep(200);
  console.log(JSON.stringify({ sent, received: [...received].sort() }));
  await producer.close();
  await consumer.close();
}

main().then(() => process.exit(0), err => {
  console.log(JSON.stringify({ error: String(err && err.stack || err) }));
  process.exit(1);
});
