import type { Executor } from '../../db/client.ts';
import type { emailLogs } from '../../db/schema/index.ts';
import type { RefusedRecipient } from '../../providers/index.ts';
import { addSuppressions } from '../suppressions/index.ts';
import { type RecipientWrite, recipientRepository } from './email-recipients.repository.ts';
import {
  applyRecipientEvent,
  type ImpliedFrom,
  impliedRecipientState,
  isUndelivered,
  type Recipient,
  type RecipientEvent,
  type RecipientKind,
  type RecipientState,
  recipientKey,
  recipientsOf,
  refusedRecipientState,
} from './email-recipients.ts';

/**
 * Writing per-recipient outcomes (issue #11; the model is in email-recipients.ts): the recipients an
 * SMTP server refused while accepting others (from the worker's outcome recorder), and the
 * recipient-specific provider events (from the provider-events module).
 */

/** A recipient refused at RCPT, as the `sent` outcome carries it (key, kind, hard/soft, diagnostic). */
export interface RefusedOutcome {
  /** The bare address lower-cased (email-recipients.ts `recipientKey`). */
  address: string;
  kind: RecipientKind;
  permanent: boolean;
  diagnostic: string;
}

/**
 * The provider's `refused` recipients (envelope addresses) as outcomes: each once, with the kind
 * (to/cc/bcc) it had on the email (`to` when the server named an address the email did not have).
 */
export function refusedOutcomesOf(
  refused: readonly RefusedRecipient[],
  email: { to: readonly string[]; cc?: readonly string[] | undefined; bcc?: readonly string[] | undefined },
): RefusedOutcome[] {
  const kinds = new Map(recipientsOf(email.to, email.cc ?? [], email.bcc ?? []).map((r) => [r.key, r.kind]));
  const seen = new Set<string>();
  return refused.flatMap(({ address, permanent, diagnostic }) => {
    const key = recipientKey(address);
    if (seen.has(key)) return [];
    seen.add(key);
    return [{ address: key, kind: kinds.get(key) ?? 'to', permanent, diagnostic }];
  });
}

/**
 * Records the refused recipients of a group of `sent` outcomes in `tx`: ONE multi-row upsert of
 * their rows (`bounced`, hard for 5xx / soft for 4xx) and ONE multi-row insert of the hard ones in
 * the suppression list (reason `hard_bounce`, the rule provider hard bounces follow). No statement
 * at all when no outcome of the group has refused recipients (the common case).
 */
export async function recordRefusedRecipients(
  tx: Executor,
  items: readonly { email: { id: string; teamId: string }; refused: readonly RefusedOutcome[] }[],
  at = new Date(),
): Promise<void> {
  const rows: RecipientWrite[] = items.flatMap(({ email, refused }) =>
    refused.map((r) => ({
      emailId: email.id,
      teamId: email.teamId,
      address: r.address,
      kind: r.kind,
      ...refusedRecipientState(r.permanent, r.diagnostic, at),
    })),
  );
  if (rows.length === 0) return;
  await recipientRepository.upsert(tx, rows);
  await addSuppressions(
    tx,
    items.flatMap(({ email, refused }) =>
      refused
        .filter((r) => r.permanent)
        .map((r) => ({ teamId: email.teamId, address: r.address, reason: 'hard_bounce' })),
    ),
  );
}

type EmailLogRow = typeof emailLogs.$inferSelect;

/** The email columns the recipient tracker reads. */
export type TrackedEmail = ImpliedFrom & Pick<EmailLogRow, 'id' | 'teamId' | 'toAddresses'>;

/**
 * The recipients of a set of emails (one team) and their states while a request's events are
 * applied in memory; {@link RecipientTracker.flush} writes the changed ones in one statement.
 * Load it in the transaction that holds the emails' row locks, so two requests about one email
 * cannot interleave their read-modify-write.
 */
export class RecipientTracker {
  readonly #recipients = new Map<string, Recipient[]>();
  readonly #states = new Map<string, Map<string, RecipientState>>();
  readonly #dirty = new Map<string, RecipientWrite>();
  readonly #emails = new Map<string, TrackedEmail>();

  private constructor() {}

  /** Loads the recipients (to, cc, bcc) and written rows of `emails` (two queries). */
  static async load(
    db: Executor,
    teamId: string,
    emails: readonly TrackedEmail[],
  ): Promise<RecipientTracker> {
    const tracker = new RecipientTracker();
    const ids = emails.map((email) => email.id);
    const [copies, rows] = await Promise.all([
      recipientRepository.copiesOf(db, teamId, ids),
      recipientRepository.rowsOf(db, teamId, ids),
    ]);
    for (const email of emails) {
      const copy = copies.get(email.id);
      const recipients = recipientsOf(email.toAddresses, copy?.cc ?? [], copy?.bcc ?? []);
      const implied = impliedRecipientState(email, recipients.length);
      tracker.#emails.set(email.id, email);
      tracker.#recipients.set(email.id, recipients);
      tracker.#states.set(email.id, new Map(recipients.map((r) => [r.key, implied])));
    }
    for (const row of rows) {
      const { emailId, teamId: _team, address, kind: _kind, updatedAt: _at, ...state } = row;
      tracker.#states
        .get(emailId)
        ?.set(address, { ...state, bounceType: state.bounceType as RecipientState['bounceType'] });
    }
    return tracker;
  }

  /**
   * Applies `event` to the recipients of email `emailId` named in `addresses` (matched by bare
   * lower-cased address; names the email does not have are ignored).
   * @returns the keys it applied to (empty: the event names none of the email's recipients), and
   *   whether every recipient of the email is now bounced or failed.
   */
  apply(
    emailId: string,
    addresses: readonly string[],
    event: RecipientEvent,
  ): { applied: string[]; allUndelivered: boolean } {
    const email = this.#emails.get(emailId);
    const states = this.#states.get(emailId);
    if (!email || !states) return { applied: [], allUndelivered: false };
    const kinds = new Map(this.#recipients.get(emailId)!.map((r) => [r.key, r.kind]));
    const applied: string[] = [];
    for (const address of new Set(addresses.map(recipientKey))) {
      const state = states.get(address);
      if (!state) continue;
      const next = applyRecipientEvent(state, event);
      states.set(address, next);
      this.#dirty.set(`${emailId} ${address}`, {
        emailId,
        teamId: email.teamId,
        address,
        kind: kinds.get(address)!,
        ...next,
      });
      applied.push(address);
    }
    const allUndelivered = [...states.values()].every((state) => isUndelivered(state.status));
    return { applied, allUndelivered };
  }

  /**
   * The keys (bare lower-cased addresses) of the recipients of loaded email `emailId` among
   * `addresses`, each once; addresses the email did not go to are left out.
   */
  recipientKeysAmong(emailId: string, addresses: readonly string[]): string[] {
    const states = this.#states.get(emailId);
    if (!states) return [];
    return [...new Set(addresses.map(recipientKey))].filter((key) => states.has(key));
  }

  /** The recipients (to, cc, bcc, each address once) of loaded email `emailId`; [] if not loaded. */
  recipientsOf(emailId: string): readonly Recipient[] {
    return this.#recipients.get(emailId) ?? [];
  }

  /** Writes the recipients changed by {@link apply} (one statement; none when nothing changed). */
  async flush(tx: Executor): Promise<void> {
    await recipientRepository.upsert(tx, [...this.#dirty.values()]);
    this.#dirty.clear();
  }
}
