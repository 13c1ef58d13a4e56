/**
 * A reference process for `npm run bench:idle-memory` (issue #9's memory target): the least a
 * server built on ARCHITECTURE.md's stack holds idle, with none of Postwright's code. Started by the
 * benchmark with this checkout's Node.js 24 and `npm start`'s V8 flags; prints "listening" once
 * ready and then idles until killed. Plain JavaScript (`.mjs`) so that Node.js's TypeScript
 * stripping is not loaded and counted.
 *
 * Usage: `node idle-floor.mjs http` — a `node:http` server on 127.0.0.1 (Node.js's own floor for
 * an HTTP server); `node idle-floor.mjs stack <postgres-url>` — a Fastify server with one route, a
 * `pg` pool that ran one query, and pg-boss started on that database working one queue (its
 * default polling), i.e. the web server, database driver and queue every Postwright process loads.
 */
import http from 'node:http';

const [mode, databaseUrl] = process.argv.slice(2);

if (mode === 'http') {
  const server = http.createServer((_request, response) => response.end('ok'));
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
} else if (mode === 'stack' && databaseUrl) {
  const { default: Fastify } = await import('fastify');
  const { default: pg } = await import('pg');
  const { PgBoss } = await import('pg-boss');
  const pool = new pg.Pool({ connectionString: databaseUrl, max: 5 });
  await pool.query('select 1');
  const boss = new PgBoss({ connectionString: databaseUrl, schema: 'idle_floor' });
  boss.on('error', (error) => console.error(error));
  await boss.start();
  await boss.createQueue('idle-floor');
  await boss.work('idle-floor', async () => {});
  const app = Fastify();
  app.get('/', async () => (await pool.query('select 1 as ok')).rows[0]);
  await app.listen({ port: 0, host: '127.0.0.1' });
} else {
  console.error('usage: idle-floor.mjs http | stack <postgres-url>');
  process.exit(2);
}
console.log('listening');
setInterval(() => {}, 60_000);
