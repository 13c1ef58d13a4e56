import { Webhook } from 'standardwebhooks';
import { describe, expect, it } from 'vitest';
import { generateWebhookSecret, signatureHeader, signingKey } from './webhook-signature.ts';

describe('webhook signatures (Standard Webhooks)', () => {
  it('signs exactly as the standardwebhooks reference implementation', () => {
    const secret = generateWebhookSecret();
    const at = new Date('2026-11-23T12:00:00.000Z');
    const body = JSON.stringify({ event: 'email.sent', data: { emailId: 'eml_1', subject: 'Grüße' } });
    const ours = signatureHeader([signingKey(secret)], 'msg_1', Math.floor(at.getTime() / 1000), body);
    expect(ours).toBe(new Webhook(secret).sign('msg_1', at, body));
  });

  it('makes whsec_ secrets of 32 random bytes, never twice the same', () => {
    const a = generateWebhookSecret();
    expect(a).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(signingKey(a)).toHaveLength(32);
    expect(generateWebhookSecret()).not.toBe(a);
    expect(() => signingKey('nope')).toThrow();
  });

  it('puts one v1 signature per key in the header, space-separated, each verifying with its secret', () => {
    const [current, previous] = [generateWebhookSecret(), generateWebhookSecret()];
    const now = new Date();
    const timestamp = Math.floor(now.getTime() / 1000);
    const header = signatureHeader([signingKey(current), signingKey(previous)], 'msg_2', timestamp, '{}');
    expect(header.split(' ')).toHaveLength(2);
    const headers = {
      'webhook-id': 'msg_2',
      'webhook-timestamp': String(timestamp),
      'webhook-signature': header,
    };
    expect(new Webhook(current).verify('{}', headers)).toEqual({});
    expect(new Webhook(previous).verify('{}', headers)).toEqual({});
    expect(() => new Webhook(generateWebhookSecret()).verify('{}', headers)).toThrow();
  });
});
