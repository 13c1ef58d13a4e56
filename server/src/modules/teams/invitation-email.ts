import type { Executor } from '../../db/client.ts';
import { escapeHtml } from '../../html-escape.ts';
import { AppError } from '../../http/errors.ts';
import { newJobId } from '../../ids.ts';
import { INVITATION_SEND_JOB, type JobPayload } from '../../jobs/definitions.ts';
import type { JobQueue } from '../../jobs/queue.ts';
import type { OutgoingEmail } from '../../providers/index.ts';
import { type AdapterRow, resolveSendingAdapter } from '../adapters/index.ts';
import type { InvitationDelivery } from './teams.schema.ts';

/** What an invitation email says. */
export interface InvitationMessage {
  to: string;
  teamName: string;
  inviterName: string;
  role: string;
  /** The link that accepts the invitation. */
  url: string;
  expiresAt: Date;
}

/**
 * The invitation as a plain email from `from`: subject, a text part and a small HTML part (names
 * HTML-escaped), both carrying the link and its expiry (UTC).
 */
export function buildInvitationEmail(message: InvitationMessage, from: string): OutgoingEmail {
  const subject = `${message.inviterName} invited you to ${message.teamName} on Postwright`;
  const expires = message.expiresAt.toUTCString();
  const text = [
    `${message.inviterName} invited you to join the team "${message.teamName}" on Postwright as ${message.role}.`,
    '',
    `Accept the invitation: ${message.url}`,
    '',
    `The link expires on ${expires}. If you did not expect this invitation, you can ignore this email.`,
  ].join('\n');
  const url = escapeHtml(message.url);
  const html = [
    '<!doctype html><html><body style="font-family: Arial, sans-serif; color: #262626;">',
    `<p>${escapeHtml(message.inviterName)} invited you to join the team <strong>${escapeHtml(message.teamName)}</strong> on Postwright as ${escapeHtml(message.role)}.</p>`,
    `<p><a href="${url}">Accept the invitation</a></p>`,
    `<p style="font-size: 12px; color: #737373;">Or open ${url}<br>The link expires on ${escapeHtml(expires)}. If you did not expect this invitation, you can ignore this email.</p>`,
    '</body></html>',
  ].join('\n');
  return { from, to: [message.to], subject, text, html };
}

/**
 * Decides, inside the transaction `tx` that creates or renews invitation `invitationId`, whether
 * its email can go out, and if so enqueues the `invitation.send` job in that same transaction (a
 * fresh job id each time: a renewal sends the link again). No network I/O: the worker sends.
 * `queued` when the team has a sending adapter (`resolveSendingAdapter`: its default when active,
 * else its oldest active one) with a defaultFrom; otherwise `skipped` with reason
 * NO_ACTIVE_ADAPTER or NO_SENDER and nothing is enqueued. Only `tx` is used (PGlite has one
 * connection, so the root database would wait for this transaction).
 */
export async function queueInvitationEmail(
  tx: Executor,
  queue: JobQueue,
  teamId: string,
  invitationId: string,
): Promise<InvitationDelivery> {
  let adapter: AdapterRow;
  try {
    adapter = await resolveSendingAdapter(tx, teamId);
  } catch (error) {
    if (error instanceof AppError && error.details.reason === 'NO_ACTIVE_ADAPTER') {
      return { status: 'skipped', reason: 'NO_ACTIVE_ADAPTER' };
    }
    throw error;
  }
  if (!adapter.defaultFrom) return { status: 'skipped', reason: 'NO_SENDER' };
  const payload: JobPayload<'invitation.send'> = { invitationId, teamId };
  await queue.enqueue(tx, INVITATION_SEND_JOB, payload, newJobId().uuid);
  return { status: 'queued' };
}
