/**
 * The send benchmark's baseline (run as a child process): a bare Fastify route that does the
 * durable work of an accepted send by hand, one transaction per request — SHA-256 API-key look-up,
 * email log + first event insert and a pg-boss job, committed together. No validation beyond the
 * essentials, no rendering, no caches: what a careful hand-written per-request endpoint costs.
 *
 * Environment: RAW_DATABASE_URL, RAW_PORT, RAW_QUEUE (the job queue; no worker takes it, the
 * benchmark deletes its rows after), RAW_TEMPLATE_ID, RAW_VERSION_ID, RAW_ADAPTER_ID.
 */
import { createHash } from 'node:crypto';
import Fastify from 'fastify';
import pg from 'pg';
import { PgBoss } from 'pg-boss';
import { newId, newJobId } from '../../server/src/ids.ts';

const env = (name: string): string => {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is required`);
  return value;
};

async function main(): Promise<void> {
  const connectionString = env('RAW_DATABASE_URL');
  const queue = env('RAW_QUEUE');
  const pool = new pg.Pool({ connectionString, max: 10 });
  const boss = new PgBoss({ connectionString, schema: 'pgboss', max: 2, supervise: false, schedule: false });
  boss.on('error', () => {});
  await boss.start();
  if (!(await boss.getQueue(queue))) await boss.createQueue(queue);
  const template = {
    id: env('RAW_TEMPLATE_ID'),
    versionId: env('RAW_VERSION_ID'),
    adapterId: env('RAW_ADAPTER_ID'),
  };

  const app = Fastify({ logger: false });
  app.post<{ Body: { to?: unknown; variables?: Record<string, unknown> } }>(
    '/raw/send',
    async (request, reply) => {
      const secret = request.headers['x-api-key'];
      if (typeof secret !== 'string') return reply.code(401).send({ success: false });
      const hash = createHash('sha256').update(secret, 'utf8').digest('hex');
      const found = await pool.query<{ id: string; team_id: string }>(
        'select id, team_id from api_keys where key_hash = $1 and is_active',
        [hash],
      );
      const key = found.rows[0];
      if (!key) return reply.code(401).send({ success: false });
      const to = typeof request.body?.to === 'string' ? [request.body.to] : undefined;
      if (!to) return reply.code(400).send({ success: false });
      const id = newId('emailLog');
      const job = newJobId();
      const client = await pool.connect();
      try {
        await client.query('begin');
        await client.query(
          `insert into email_logs (id, team_id, template_id, template_name, template_version_id, adapter_id,
           api_key_id, to_addresses, from_address, subject, variables, status, job_id)
         values ($1, $2, $3, 'Welcome', $4, $5, $6, $7, 'bench@postwright.test', 'Welcome', $8, 'queued', $9)`,
          [
            id,
            key.team_id,
            template.id,
            template.versionId,
            template.adapterId,
            key.id,
            to,
            request.body.variables ?? {},
            job.jobId,
          ],
        );
        await client.query(
          `insert into email_events (id, team_id, email_id, status, detail) values ($1, $2, $3, 'queued', '{}')`,
          [newId('emailEvent'), key.team_id, id],
        );
        await boss.send(
          queue,
          { emailId: id, teamId: key.team_id },
          { id: job.uuid, db: { executeSql: (text, values) => client.query(text, values) } },
        );
        await client.query('commit');
      } catch (error) {
        await client.query('rollback').catch(() => {});
        throw error;
      } finally {
        client.release();
      }
      return reply.code(202).send({ success: true, data: { id, jobId: job.jobId, status: 'queued' } });
    },
  );
  await app.listen({ host: '127.0.0.1', port: Number(env('RAW_PORT')) });
  console.log('raw server ready');
  process.once('SIGTERM', () => {
    void app
      .close()
      .then(() => boss.stop({ graceful: false, close: true }))
      .then(() => pool.end())
      .finally(() => process.exit(0));
  });
}

void main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
