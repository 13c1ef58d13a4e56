import type { Executor } from '../../db/client.ts';
import { AppError } from '../../http/errors.ts';
import { createProvider, type EmailProvider, type OutgoingEmail } from '../../providers/index.ts';
import {
  type AdapterRow,
  type AdapterType,
  adapterConfig,
  resolveSendingAdapter,
} from '../adapters/index.ts';
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

const HTML_ESCAPES: Record<string, string> = {
  '&': '&amp;',
  '<': '&lt;',
  '>': '&gt;',
  '"': '&quot;',
  "'": '&#39;',
};

function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => HTML_ESCAPES[c]!);
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
 * Sends the invitation through the team's sending adapter (its default when active, else its
 * oldest active one: `resolveSendingAdapter`), from the adapter's defaultFrom, with a provider
 * opened for this one message and closed afterwards. Never throws for a delivery problem, since a
 * failed email must not fail the invitation (issue #3): returns `skipped` (reason
 * NO_ACTIVE_ADAPTER or NO_SENDER) or `failed` with the provider's message instead.
 */
export async function sendInvitationEmail(
  deps: { db: Executor; encryptionKey: Buffer },
  teamId: string,
  message: InvitationMessage,
): Promise<InvitationDelivery> {
  let adapter: AdapterRow;
  try {
    adapter = await resolveSendingAdapter(deps.db, teamId);
  } catch (error) {
    if (error instanceof AppError && error.details.reason === 'NO_ACTIVE_ADAPTER') {
      return { status: 'skipped', reason: 'NO_ACTIVE_ADAPTER' };
    }
    throw error;
  }
  if (!adapter.defaultFrom) return { status: 'skipped', reason: 'NO_SENDER' };

  let provider: EmailProvider | undefined;
  try {
    provider = createProvider(adapter.type as AdapterType, adapterConfig(adapter, deps.encryptionKey));
    await provider.send(buildInvitationEmail(message, adapter.defaultFrom));
    return { status: 'sent' };
  } catch (error) {
    return { status: 'failed', message: error instanceof Error ? error.message : String(error) };
  } finally {
    await provider?.close().catch(() => {});
  }
}
