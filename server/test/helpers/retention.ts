import { sql } from 'drizzle-orm';
import type { FastifyInstance } from 'fastify';
import { expect } from 'vitest';
import type { Database } from '../../src/db/client.ts';
import { MaintenanceLoop, type MaintenanceLoopDeps } from '../../src/modules/maintenance/index.ts';
import type { SendingTeam } from './sending-team.ts';

/**
 * A send of the team's template (or `options.templateId`) scheduled a day ahead, with one CSV
 * attachment and `options.fields` added (cc, metadata, …), under `options.idempotencyKey` if given;
 * with no workers it stays `queued`. Returns its id.
 */
export async function scheduledSend(
  app: FastifyInstance,
  team: SendingTeam,
  options: { templateId?: string; idempotencyKey?: string; fields?: Record<string, unknown> } = {},
): Promise<string> {
  const response = await app.inject({
    method: 'POST',
    url: '/api/v1/send',
    headers: {
      'x-api-key': team.key,
      ...(options.idempotencyKey ? { 'idempotency-key': options.idempotencyKey } : {}),
    },
    payload: {
      templateId: options.templateId ?? team.templateId,
      to: 'ada@example.test',
      variables: { first_name: 'Ada' },
      attachments: [{ filename: 'rows.csv', content: Buffer.from('a,b\n1,2\n').toString('base64') }],
      scheduledAt: new Date(Date.now() + 24 * 3600_000).toISOString(),
      ...options.fields,
    },
  });
  expect(response.statusCode, response.body).toBe(202);
  return response.json().data.id as string;
}

/** Cancels a queued email: it becomes `failed` (not queued any more, resendable), with a history event. */
export async function cancelEmail(app: FastifyInstance, team: SendingTeam, id: string): Promise<void> {
  const response = await app.inject({
    method: 'POST',
    url: `/api/v1/${id}/cancel`,
    headers: { 'x-api-key': team.key },
  });
  expect(response.statusCode, response.body).toBe(200);
}

/** Moves an email log's creation `days` days back (past LOG_RETENTION_DAYS). */
export async function ageEmailLog(db: Database, emailId: string, days: number): Promise<void> {
  await db.execute(
    sql`update email_logs set created_at = now() - make_interval(days => ${days}) where id = ${emailId}`,
  );
}

/**
 * Maintenance loops a test file makes over its database (`deps().database`), none started:
 * `create` one (overrides on the defaults: no retention, `errors` collects what a run logs as
 * an error), `stopAll` in the file's afterAll.
 */
export class TestMaintenanceLoops {
  /** What the loops' runs logged as errors. */
  readonly errors: unknown[] = [];
  readonly #loops: MaintenanceLoop[] = [];
  readonly #database: () => MaintenanceLoopDeps['database'];

  constructor(database: () => MaintenanceLoopDeps['database']) {
    this.#database = database;
  }

  create(overrides: Partial<MaintenanceLoopDeps> = {}): MaintenanceLoop {
    const loop = new MaintenanceLoop({
      database: this.#database(),
      config: {},
      logger: { info() {}, error: (details) => this.errors.push(details) },
      ...overrides,
    });
    this.#loops.push(loop);
    return loop;
  }

  async stopAll(): Promise<void> {
    await Promise.all(this.#loops.map((loop) => loop.stop(1_000)));
  }
}

/** The rows `query` returns on `db`. */
export async function rowsOf<T>(db: Database, query: ReturnType<typeof sql>): Promise<T[]> {
  return ((await db.execute(query)) as unknown as { rows: T[] }).rows;
}
