import addressparser from 'nodemailer/lib/addressparser';
import { z } from 'zod';

const plainAddress = z.email();

/**
 * True when `value` is one mailbox (RFC 5322 §3.4): `user@example.com` or
 * `Display Name <user@example.com>`, with a syntactically valid address and no group or list.
 * Parsing is nodemailer's addressparser; the address check is zod's email rule.
 */
export function isMailbox(value: string): boolean {
  if (/[\r\n]/.test(value)) return false;
  const parsed = addressparser(value);
  if (parsed.length !== 1) return false;
  const [entry] = parsed;
  if (!entry || 'group' in entry) return false;
  return plainAddress.safeParse(entry.address).success;
}

/** The bare address of a mailbox (`user@example.com` from `Name <user@example.com>`), lower-cased domain. */
export function mailboxAddress(value: string): string {
  const [entry] = addressparser(value);
  const address = (entry && 'address' in entry ? entry.address : undefined) ?? value;
  const at = address.lastIndexOf('@');
  return at < 0 ? address : `${address.slice(0, at)}@${address.slice(at + 1).toLowerCase()}`;
}

/** zod schema for a single mailbox string (see {@link isMailbox}). */
export const mailboxSchema = z
  .string()
  .trim()
  .min(3)
  .max(320)
  .refine(isMailbox, 'must be an email address, optionally with a display name ("Name <user@example.com>")');
