// startup() of a rocketmq-client-nodejs 1.0.8 client, bounded in time and made safe for clients
// with several topics.  The SDK's startup() fetches the route of each topic in turn, sends its
// Settings on the Telemetry stream as soon as the first route names a new endpoint, and only then,
// after the last route, starts listening for the server's Settings answer: an answer that arrives
// while a later route is being fetched is dropped and startup() waits forever.  start() sends the
// Settings again every RESEND_MS until startup() returns (an extra Settings is harmless: the server
// answers each), and fails after limitMs naming what it started.
const RESEND_MS = 2000;

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function start(client, what, limitMs = 60000) {
  let done = false;
  const started = client.startup().finally(() => { done = true; });
  const deadline = Date.now() + limitMs;
  while (!done && Date.now() < deadline) {
    await Promise.race([started.catch(() => {}), sleep(RESEND_MS)]);
    if (done) break;
    console.error(`${what}: no Settings answer yet, sending the Settings again`);
    for (const endpoints of client.getTotalRouteEndpoints()) client.getTelemetrySession(endpoints).syncSettings();
  }
  if (!done) throw new Error(`${what}: startup() did not finish within ${limitMs} ms`);
  return started;
}

module.exports = { start };
