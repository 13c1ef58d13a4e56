import { LRUCache } from 'lru-cache';
import type { Executor } from '../../db/client.ts';
import { estimatedHeapBytes } from '../../heap-weight.ts';
import { type AdapterRow, findAdapters } from '../adapters/index.ts';
import { findSuppression } from '../suppressions/index.ts';
import { findTemplateVersions, type TemplateVersionRow } from '../templates/index.ts';
import { type EmailLogRow, emailRepository } from './emails.repository.ts';

/** What the worker knows about one job of a batch before sending it. */
export type PreparedSend =
  /** Nothing to do: the email is gone or no longer `queued` (an earlier attempt finished it). */
  | { kind: 'skip' }
  /**
   * The email cannot be sent, whatever the retries (adapter deleted or disabled, version gone, a
   * recipient on the team's suppression list: "suppressed: <reason>", issue #10).
   */
  | { kind: 'unsendable'; log: EmailLogRow; message: string }
  | {
      kind: 'ready';
      log: EmailLogRow;
      adapter: AdapterRow;
      version: TemplateVersionRow;
      /**
       * When the suppression list was read for it (performance.now(), ms); undefined when that
       * lookup failed. The worker looks again once the email holds a connection slot when this is
       * older than {@link SUPPRESSION_FRESH_MS} or undefined (see {@link needsSuppressionCheck}).
       */
      suppressionCheckedAt?: number;
    };

/**
 * How long (ms) the batch's suppression lookup stands for an email still waiting for a connection
 * slot: past it, the worker looks again before sending. An email may wait behind up to three sends
 * of its adapter (team cap 4 × connections), seconds or, with a hanging provider, minutes; an
 * address suppressed meanwhile (a hard bounce of an earlier email of the batch, an unsubscribe) must
 * not get it (review finding, session 21).
 */
export const SUPPRESSION_FRESH_MS = 1_000;

/** Whether the worker must look the email's recipients up again before sending it. */
export function needsSuppressionCheck(
  item: { suppressionCheckedAt?: number | undefined },
  now = performance.now(),
): boolean {
  return item.suppressionCheckedAt === undefined || now - item.suppressionCheckedAt > SUPPRESSION_FRESH_MS;
}

/** Every recipient of an email: its logged `to`, then the job's cc and bcc. */
export function recipientsOf(log: Pick<EmailLogRow, 'toAddresses'>, fields: SendRef['fields']): string[] {
  return [...log.toAddresses, ...(fields?.cc ?? []), ...(fields?.bcc ?? [])];
}

/** A job of the batch: its email, its team, and the send's extra recipients (issue #10). */
export interface SendRef {
  teamId: string;
  emailId: string;
  fields?: { cc?: readonly string[]; bcc?: readonly string[] } | undefined;
}

/** Template versions kept in memory (they are immutable, so an entry never goes stale). */
const MAX_CACHED_VERSIONS = 1_000;
/**
 * Most bytes of template versions kept (estimatedHeapBytes of the rows): a design of 2 MB of JSON
 * may take 40 MB parsed, so 1,000 versions alone could exhaust the worker's heap.
 */
export const CACHED_VERSIONS_MAX_BYTES = 64 * 1024 * 1024;

/**
 * Loads what a batch of `email.send` jobs needs in a constant number of round trips (issue #9): the
 * logs (one query), then together their adapters (one), the template versions not cached yet (at
 * most one) and the suppression list entries of their recipients (one for the whole batch:
 * findSuppression joins the lookups of one tick; it was one per email as each took a connection
 * slot, about 40 % of the worker's queries in bench:send, session 21; the worker looks again for
 * an email that waited longer than {@link SUPPRESSION_FRESH_MS} for its slot).
 * Every lookup is scoped by the team the job names. Adapters are read each batch (an adapter
 * disabled or changed since is seen at once); their decrypted config and connection pool are
 * cached by adapter id + updatedAt in the adapters module's `providerFor`.
 * Returns one {@link PreparedSend} per ref, in order.
 * @throws database errors (the jobs are retried).
 */
export class SendBatchLoader {
  readonly #versions = new LRUCache<string, TemplateVersionRow>({
    max: MAX_CACHED_VERSIONS,
    maxSize: CACHED_VERSIONS_MAX_BYTES,
    sizeCalculation: (version) => Math.max(1, estimatedHeapBytes(version)),
  });

  /** The estimated bytes of the versions kept now (for tests and diagnostics). */
  get cachedBytes(): number {
    return this.#versions.calculatedSize;
  }

  async load(db: Executor, refs: readonly SendRef[]): Promise<PreparedSend[]> {
    const logs = await emailRepository.findLogs(
      db,
      refs.map((ref) => ({ teamId: ref.teamId, id: ref.emailId })),
    );
    const queued = new Map(logs.filter((log) => log.status === 'queued').map((log) => [log.id, log]));
    const wanted = [...queued.values()];
    const fieldsOf = new Map(refs.map((ref) => [ref.emailId, ref.fields]));
    const [adapters, versions, suppressed] = await Promise.all([
      findAdapters(
        db,
        wanted.map((log) => ({ teamId: log.teamId, id: log.adapterId })),
      ),
      this.#loadVersions(db, wanted),
      // Called for every email in this one tick: one query for all of them. A failed lookup fails no
      // email here: each looks again once it holds a slot, and a failure there is its own retry.
      Promise.all(
        wanted.map((log) => findSuppression(db, log.teamId, recipientsOf(log, fieldsOf.get(log.id)))),
      ).then(
        (found) => new Map(wanted.map((log, index) => [log.id, found[index]])),
        () => undefined,
      ),
    ]);
    const checkedAt = performance.now();
    return refs.map((ref) => {
      const log = queued.get(ref.emailId);
      if (!log || log.teamId !== ref.teamId) return { kind: 'skip' };
      const adapter = adapters.get(log.adapterId);
      if (!adapter)
        return { kind: 'unsendable', log, message: 'The adapter this email was queued for was deleted' };
      if (!adapter.isActive)
        return { kind: 'unsendable', log, message: `Adapter "${adapter.name}" is disabled` };
      const version = versions.get(log.templateVersionId);
      if (!version) return { kind: 'unsendable', log, message: 'Template version not found' };
      if (!suppressed) return { kind: 'ready', log, adapter, version };
      const suppression = suppressed.get(log.id);
      if (suppression) return { kind: 'unsendable', log, message: `suppressed: ${suppression.reason}` };
      return { kind: 'ready', log, adapter, version, suppressionCheckedAt: checkedAt };
    });
  }

  async #loadVersions(db: Executor, logs: EmailLogRow[]): Promise<Map<string, TemplateVersionRow>> {
    const found = new Map<string, TemplateVersionRow>();
    const missing: { teamId: string; id: string }[] = [];
    for (const log of logs) {
      const cached = this.#versions.get(log.templateVersionId);
      // A cached version is another team's only if ids collide, which TypeIDs rule out; checked anyway.
      if (cached?.teamId === log.teamId) found.set(cached.id, cached);
      else missing.push({ teamId: log.teamId, id: log.templateVersionId });
    }
    if (missing.length > 0) {
      for (const version of (await findTemplateVersions(db, missing)).values()) {
        this.#versions.set(version.id, version);
        found.set(version.id, version);
      }
    }
    return found;
  }
}
