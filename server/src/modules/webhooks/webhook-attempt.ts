import { createSecretKey, type KeyObject } from 'node:crypto';
import { LRUCache } from 'lru-cache';
import { newId } from '../../ids.ts';
import { ConfigDecryptionError } from '../adapters/index.ts';
import type { AttemptResult, WebhookClient } from './webhook-client.ts';
import { decryptWebhookSecret } from './webhook-secret-store.ts';
import { signatureHeader, signingKey } from './webhook-signature.ts';
import type { NewWebhookDeliveryRow, WebhookRow } from './webhooks.repository.ts';

/** One attempt to make: which webhook, which message (the `webhook-id`), its body, its number. */
export interface AttemptRequest {
  webhook: WebhookRow;
  messageId: string;
  event: string;
  /** The event's JSON text, sent as is (and signed). */
  body: string;
  /**
   * The event as an object, for the delivery record's `payload` when the caller shows it (the
   * test and redeliver endpoints); the worker's records take the body from the outbox row.
   */
  payload?: unknown;
  /** 1 for the first attempt of the message. */
  attempt: number;
}

/** What an attempt did: its delivery record (to insert), the HTTP result and the body it sent. */
export interface AttemptOutcome {
  delivery: NewWebhookDeliveryRow & { id: string; createdAt: Date };
  result: AttemptResult;
  /**
   * `delivery.payload` as the JSON text sent, when known (the record then stores it without
   * serialising it again).
   */
  body?: string;
}

/** Decrypted signing keys kept per ENCRYPTION_KEY (a process may hold several contexts). */
const SIGNING_KEYS_CACHED = 1_000;
const signingKeyCaches = new WeakMap<Buffer, LRUCache<string, KeyObject>>();

/**
 * The signing key of one stored secret of `webhook` (a KeyObject: signing with it is cheaper than
 * with its Buffer, see signatureHeader), decrypted once per process and ciphertext:
 * the cache key is the webhook id and the ciphertext itself (a rotation writes a new one, with a
 * fresh IV), so a rotated secret is never served from the cache. A ciphertext that does not
 * decrypt is not cached (it throws each time).
 */
function cachedSigningKey(encryptionKey: Buffer, webhook: WebhookRow, ciphertext: string): KeyObject {
  let cache = signingKeyCaches.get(encryptionKey);
  if (!cache) {
    cache = new LRUCache<string, KeyObject>({ max: SIGNING_KEYS_CACHED });
    signingKeyCaches.set(encryptionKey, cache);
  }
  const cacheKey = `${webhook.teamId}:${webhook.id}:${ciphertext}`;
  let key = cache.get(cacheKey);
  if (!key) {
    key = createSecretKey(
      signingKey(decryptWebhookSecret(encryptionKey, ciphertext, webhook.teamId, webhook.id)),
    );
    cache.set(cacheKey, key);
  }
  return key;
}

/**
 * Webhooks whose rotated-out secret did not decrypt, already logged (per ENCRYPTION_KEY): logged
 * once per webhook, not once per delivery.
 */
const unreadableLogged = new WeakMap<Buffer, LRUCache<string, true>>();

/**
 * The signing keys of `webhook` at `now`: its secret, then each secret rotated out within the last
 * 24 h (`previousSecrets` before their `expiresAt`; issue #11), so receivers holding any of them
 * verify. Decrypted keys are cached per ENCRYPTION_KEY, webhook and ciphertext (see
 * cachedSigningKey). A rotated-out secret that does not decrypt (written under another
 * ENCRYPTION_KEY) is left out, logged once per webhook (never the secret): rotating the secret was
 * the fix for a changed key, and one unreadable old secret failed every delivery for its 24 h
 * (review finding, integrity 2).
 * @throws ConfigDecryptionError when the webhook's current secret does not decrypt (wrong
 *   ENCRYPTION_KEY; rotating the secret writes one under the key in use).
 */
export function signingKeysOf(webhook: WebhookRow, encryptionKey: Buffer, now: Date): KeyObject[] {
  const keys = [cachedSigningKey(encryptionKey, webhook, webhook.secretEncrypted)];
  for (const previous of webhook.previousSecrets) {
    if (Date.parse(previous.expiresAt) <= now.getTime()) continue;
    try {
      keys.push(cachedSigningKey(encryptionKey, webhook, previous.secret));
    } catch (error) {
      if (!(error instanceof ConfigDecryptionError)) throw error;
      logUnreadablePrevious(encryptionKey, webhook);
    }
  }
  return keys;
}

function logUnreadablePrevious(encryptionKey: Buffer, webhook: WebhookRow): void {
  let logged = unreadableLogged.get(encryptionKey);
  if (!logged) {
    logged = new LRUCache<string, true>({ max: SIGNING_KEYS_CACHED });
    unreadableLogged.set(encryptionKey, logged);
  }
  if (logged.has(webhook.id)) return;
  logged.set(webhook.id, true);
  console.warn(
    `[webhooks] webhook ${webhook.id}: a rotated-out secret does not decrypt with this ENCRYPTION_KEY; deliveries are signed without it`,
  );
}

/**
 * Makes one signed delivery attempt (Standard Webhooks headers: `webhook-id` = the message id,
 * stable across attempts; `webhook-timestamp` = now in Unix seconds; `webhook-signature`) and
 * returns its delivery record, not yet stored. Never throws for HTTP failures (they are the
 * record's outcome); a secret that does not decrypt is recorded as a failed attempt too.
 */
export async function attemptDelivery(
  client: WebhookClient,
  encryptionKey: Buffer,
  request: AttemptRequest,
): Promise<AttemptOutcome> {
  const { webhook } = request;
  const now = new Date();
  const { body } = request;
  let result: AttemptResult;
  try {
    const keys = signingKeysOf(webhook, encryptionKey, now);
    const timestamp = Math.floor(now.getTime() / 1000);
    result = await client.post(
      webhook.url,
      {
        'webhook-id': request.messageId,
        'webhook-timestamp': String(timestamp),
        'webhook-signature': signatureHeader(keys, request.messageId, timestamp, body),
      },
      body,
    );
  } catch (error) {
    result = {
      success: false,
      responseStatus: null,
      responseBody: null,
      error: `Could not sign the request: ${error instanceof Error ? error.message : String(error)}`,
      durationMs: 0,
    };
  }
  return {
    result,
    body,
    delivery: {
      id: newId('webhookDelivery'),
      teamId: webhook.teamId,
      webhookId: webhook.id,
      messageId: request.messageId,
      event: request.event,
      payload: request.payload,
      responseStatus: result.responseStatus,
      responseBody: result.responseBody,
      success: result.success,
      attemptCount: request.attempt,
      durationMs: result.durationMs,
      error: result.error,
      createdAt: new Date(),
    },
  };
}
