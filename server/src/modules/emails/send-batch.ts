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
  /** The email cannot be sent, whatever the retries (adapter deleted or disabled, version gone). */
  | { kind: 'unsendable'; log: EmailLogRow; message: string }
  | {
      kind: 'ready';
      log: EmailLogRow;
      adapter: AdapterRow;
      version: TemplateVersionRow;
      /**
       * Set when a recipient (to, cc or bcc) is on the team's suppression list: the email's
       * `errorMessage`, "suppressed: <reason>" (issue #10); it fails without calling the provider.
       */
      suppressed?: string;
    };

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
 * slot, about 40 % of the worker's queries in bench:send, session 21).
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
      // Called for every email in this one tick: one query for all of them.
      Promise.all(
        wanted.map((log) => {
          const fields = fieldsOf.get(log.id);
          const recipients = [...log.toAddresses, ...(fields?.cc ?? []), ...(fields?.bcc ?? [])];
          return findSuppression(db, log.teamId, recipients);
        }),
      ).then((found) => new Map(wanted.map((log, index) => [log.id, found[index]]))),
    ]);
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
      const suppression = suppressed.get(log.id);
      return suppression
        ? { kind: 'ready', log, adapter, version, suppressed: `suppressed: ${suppression.reason}` }
        : { kind: 'ready', log, adapter, version };
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
