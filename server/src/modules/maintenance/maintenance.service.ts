import type { Executor } from '../../db/client.ts';
import { maintenanceRepository } from './maintenance.repository.ts';

/** Most rows one delete statement removes (a batch). */
export const MAINTENANCE_BATCH_ROWS = 1_000;
/** Team or webhook ids read per page of the retention's walks. */
const IDS_PER_PAGE = 100;

/** Rows one maintenance run deleted, per table, and whether it got through every sweep. */
export interface MaintenanceReport {
  idempotencyKeys: number;
  sessions: number;
  providerEventTokens: number;
  /** Email logs (their events, recipients, send options and attachments went with them). */
  emailLogs: number;
  /** Versions of deleted templates that no email log names any more. */
  templateVersions: number;
  webhookDeliveries: number;
  /** False when the run's time budget ran out, or a stop began, first: the next run goes on. */
  finished: boolean;
}

/**
 * Where the walks stopped when a run ended early: the id after which the next run starts ('' =
 * from the first), so a team or webhook late in id order is not left waiting behind earlier ones'
 * backlogs, and the versions of deleted templates that logs still name are not looked at again
 * before the others. Kept by the loop, per process.
 */
export interface RetentionCursor {
  team: string;
  webhook: string;
  /** The last version of a deleted template looked at. */
  version: string;
}

/** What one run may do. */
export interface MaintenanceRunOptions {
  /** LOG_RETENTION_DAYS: undefined keeps email logs and delivery records for ever. */
  retentionDays: number | undefined;
  /** Asked before each statement but the run's first: false ends the run there (time budget, stop). */
  canContinue: () => boolean;
  cursor: RetentionCursor;
  /** Rows per statement; {@link MAINTENANCE_BATCH_ROWS} unless a test needs several batches. */
  batchRows?: number;
}

/**
 * One maintenance run over `db` (review finding "growth": what grows without bound is deleted in
 * bounded batches): expired idempotency keys, sessions expired over a day ago, provider event
 * tokens past their window, then, with `retentionDays`, email logs older than that which are not
 * `queued` (team by team), then the versions of deleted templates that no log names any more (review
 * finding diff19 1), then, with `retentionDays`, webhook delivery records older than that (webhook
 * by webhook). Each sweep repeats its statement while it deletes a full batch (the versions' walk:
 * while it looks at one). A batch is bounded in rows, not bytes: a batch of logs that carry large
 * attachments takes longer (200 logs with a 512 KB attachment each: 149 ms and 55 MB of WAL, review
 * diff19), and a statement runs to its end even past the time budget. Every statement but the run's
 * first asks `canContinue()` before it starts; a no ends the run there (`finished` false).
 * @returns the rows deleted per table. Throws what the database throws (the loop logs it).
 */
export async function runMaintenance(
  db: Executor,
  options: MaintenanceRunOptions,
): Promise<MaintenanceReport> {
  const limit = options.batchRows ?? MAINTENANCE_BATCH_ROWS;
  const { cursor, retentionDays } = options;
  const repository = maintenanceRepository;
  let asked = 0;
  const mayRun = () => asked++ === 0 || options.canContinue();
  const report: MaintenanceReport = {
    idempotencyKeys: 0,
    sessions: 0,
    providerEventTokens: 0,
    emailLogs: 0,
    templateVersions: 0,
    webhookDeliveries: 0,
    finished: false,
  };
  const sweeps: [Exclude<keyof MaintenanceReport, 'finished'>, () => Promise<Sweep>][] = [
    ['idempotencyKeys', () => sweep(mayRun, limit, () => repository.deleteExpiredIdempotencyKeys(db, limit))],
    ['sessions', () => sweep(mayRun, limit, () => repository.deleteExpiredSessions(db, limit))],
    [
      'providerEventTokens',
      () => sweep(mayRun, limit, () => repository.deleteOldProviderEventTokens(db, limit)),
    ],
  ];
  /**
   * The retention's sweep of `table`: owner by owner (`idsAfter` pages through teams or webhooks),
   * `deleteOld` of each; none without `retentionDays`.
   */
  const retention = (
    table: 'emailLogs' | 'webhookDeliveries',
    key: 'team' | 'webhook',
    idsAfter: (db: Executor, after: string, limit: number) => Promise<string[]>,
    deleteOld: (db: Executor, ownerId: string, days: number, limit: number) => Promise<number>,
  ): typeof sweeps => {
    if (retentionDays === undefined) return [];
    const days = retentionDays;
    return [
      [
        table,
        () =>
          walk(
            { cursor, key, mayRun },
            (after) => idsAfter(db, after, IDS_PER_PAGE),
            (id) => sweep(mayRun, limit, () => deleteOld(db, id, days, limit)),
          ),
      ],
    ];
  };
  sweeps.push(
    ...retention('emailLogs', 'team', repository.teamIdsAfter, repository.deleteOldEmailLogs),
    // After the logs: the versions whose last logs this run deleted go in the same run.
    ['templateVersions', () => sweepOrphanedVersions(db, { cursor, mayRun }, limit)],
    ...retention(
      'webhookDeliveries',
      'webhook',
      repository.webhookIdsAfter,
      repository.deleteOldWebhookDeliveries,
    ),
  );
  for (const [table, run] of sweeps) {
    const result = await run();
    report[table] += result.deleted;
    if (!result.done) return report;
  }
  report.finished = true;
  return report;
}

/** What a sweep deleted, and whether it got to the end (false: `mayRun` said no first). */
interface Sweep {
  deleted: number;
  done: boolean;
}

/** Runs `batch` (a delete of at most `limit` rows) until it deletes fewer, each time if `mayRun()`. */
async function sweep(mayRun: () => boolean, limit: number, batch: () => Promise<number>): Promise<Sweep> {
  let deleted = 0;
  for (;;) {
    if (!mayRun()) return { deleted, done: false };
    const rows = await batch();
    deleted += rows;
    if (rows < limit) return { deleted, done: true };
  }
}

/**
 * Deletes the versions of deleted templates that no log names, looking at `limit` of them per
 * statement in id order from `cursor.version` on, each time if `mayRun()`; at the last one the
 * cursor goes back to ''.
 */
async function sweepOrphanedVersions(
  db: Executor,
  position: { cursor: RetentionCursor; mayRun: () => boolean },
  limit: number,
): Promise<Sweep> {
  const { cursor, mayRun } = position;
  let deleted = 0;
  for (;;) {
    if (!mayRun()) return { deleted, done: false };
    const batch = await maintenanceRepository.deleteOrphanedTemplateVersions(db, cursor.version, limit);
    deleted += batch.deleted;
    if (batch.examined < limit) {
      cursor.version = '';
      return { deleted, done: true };
    }
    cursor.version = batch.last;
  }
}

/**
 * Runs `sweepOne` for every id `idsAfter` pages through, from `cursor[key]` on. Stopped early, the
 * cursor is left so that the next run starts with the id that was not finished; at the last id it
 * goes back to '' (ids before where this walk started are the next run's).
 */
async function walk(
  position: { cursor: RetentionCursor; key: keyof RetentionCursor; mayRun: () => boolean },
  idsAfter: (after: string) => Promise<string[]>,
  sweepOne: (id: string) => Promise<Sweep>,
): Promise<Sweep> {
  const { cursor, key, mayRun } = position;
  let deleted = 0;
  for (;;) {
    if (!mayRun()) return { deleted, done: false };
    const ids = await idsAfter(cursor[key]);
    for (const id of ids) {
      const result = await sweepOne(id);
      deleted += result.deleted;
      if (!result.done) return { deleted, done: false };
      cursor[key] = id;
    }
    if (ids.length < IDS_PER_PAGE) {
      cursor[key] = '';
      return { deleted, done: true };
    }
  }
}

/**
 * Deletes every expired idempotency key now, {@link MAINTENANCE_BATCH_ROWS} per statement, with no
 * time budget (emails/idempotency.ts `sweepExpired`; the loop's runs sweep them within theirs).
 * @returns the rows deleted.
 */
export async function sweepExpiredIdempotencyKeys(db: Executor): Promise<number> {
  const limit = MAINTENANCE_BATCH_ROWS;
  const result = await sweep(
    () => true,
    limit,
    () => maintenanceRepository.deleteExpiredIdempotencyKeys(db, limit),
  );
  return result.deleted;
}
