import { randomUUID } from 'node:crypto';
import { TypeID, typeid } from 'typeid-js';

/**
 * Id prefixes from the spec ("Resources and their fields"), plus the internal ones
 * (sessions, accounts, members, invitations, verifications, status events).
 */
export const ID_PREFIX = {
  apiKey: 'key',
  adapter: 'adp',
  template: 'tpl',
  templateVersion: 'ver',
  emailLog: 'eml',
  emailEvent: 'evt',
  webhook: 'whk',
  webhookDelivery: 'del',
  /** A webhook event message (Standard Webhooks `webhook-id`), shared by its delivery attempts. */
  webhookMessage: 'msg',
  job: 'job',
  user: 'usr',
  team: 'team',
  session: 'ses',
  account: 'acc',
  member: 'mem',
  invitation: 'inv',
  verification: 'vrf',
  attachment: 'att',
  suppression: 'sup',
} as const;

export type IdKind = keyof typeof ID_PREFIX;

/** A new time-sortable TypeID string such as `tpl_01jd…` (UUIDv7 inside). */
export function newId(kind: IdKind): string {
  return typeid(ID_PREFIX[kind]).toString();
}

/**
 * A new TypeID of `kind` that cannot be guessed: the same `inv_…` spelling as {@link newId}, but
 * built from a random UUIDv4 (122 random bits) instead of a UUIDv7, which is time-ordered and,
 * given another id from the same process, leaves only about 43 unpredictable bits. Invitation ids
 * use it (though since issue #8 they accept nothing: links carry a separate token). These ids are
 * not time-sortable.
 */
export function newUnguessableId(kind: IdKind): string {
  return TypeID.fromUUID(ID_PREFIX[kind], randomUUID()).toString();
}

/**
 * A job id: the TypeID (`job_…`) shown to clients and the UUID pg-boss stores,
 * two spellings of the same UUIDv7.
 */
export function newJobId(): { jobId: string; uuid: string } {
  const id = typeid(ID_PREFIX.job);
  return { jobId: id.toString(), uuid: id.toUUID() };
}

/** The `job_…` spelling of a pg-boss job UUID. */
export function jobIdFromUuid(uuid: string): string {
  return TypeID.fromUUID(ID_PREFIX.job, uuid).toString();
}

/**
 * The pg-boss UUID of a `job_…` id (see newJobId), or undefined when `jobId` is not a job TypeID.
 */
export function uuidOfJobId(jobId: string): string | undefined {
  try {
    const id = TypeID.fromString(jobId);
    return id.getType() === ID_PREFIX.job ? id.toUUID() : undefined;
  } catch {
    return undefined;
  }
}

/** True when `value` looks like an id of `kind` (prefix check only, no database look-up). */
export function hasIdPrefix(value: string, kind: IdKind): boolean {
  return value.startsWith(`${ID_PREFIX[kind]}_`);
}
