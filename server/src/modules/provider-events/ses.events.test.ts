import { randomUUID } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import { selfSignedSnsCertificate, signSnsMessage } from '../../../test/helpers/sns-certificate.ts';
import { AppError } from '../../http/errors.ts';
import type { ProviderEventDeps } from './provider-event.ts';
import {
  CERTIFICATE_CACHE_MAX,
  certificateCache,
  isSnsUrl,
  parseSesEvents,
  SNS_MESSAGE_MAX_AGE_MS,
  snsCertificateUrl,
} from './ses.events.ts';

describe('isSnsUrl (the only URLs the SNS handler fetches)', () => {
  it.each([
    'https://sns.us-east-1.amazonaws.com/SimpleNotificationService-0000.pem',
    'https://sns.eu-west-1.amazonaws.com/?Action=ConfirmSubscription&TopicArn=x&Token=y',
    'https://sns.cn-north-1.amazonaws.com.cn/SimpleNotificationService-1.pem',
    'https://sns.us-gov-west-1.amazonaws.com/SimpleNotificationService-1.pem',
  ])('accepts %s', (url) => {
    expect(isSnsUrl(url, undefined)).toBe(true);
  });

  it.each([
    'http://sns.us-east-1.amazonaws.com/cert.pem',
    'https://sns.us-east-1.amazonaws.com.evil.example/cert.pem',
    'https://evil.example/sns.us-east-1.amazonaws.com/cert.pem',
    'https://sns.us-east-1.amazonaws.com:8443/cert.pem',
    'https://s3.amazonaws.com/cert.pem',
    // S3 virtual hosts of a bucket named "sns" (anyone's), review, session 13.
    'https://sns.s3.amazonaws.com/SimpleNotificationService-1.pem',
    'https://sns.s3-accelerate.amazonaws.com/SimpleNotificationService-1.pem',
    'https://sns.s3-website.amazonaws.com/SimpleNotificationService-1.pem',
    'https://user:pw@sns.us-east-1.amazonaws.com/cert.pem',
    'http://169.254.169.254/latest/meta-data/',
    'not a url',
  ])('refuses %s', (url) => {
    expect(isSnsUrl(url, undefined)).toBe(false);
  });

  it('accepts the operator override origin only, not other local origins', () => {
    expect(isSnsUrl('http://127.0.0.1:9000/cert.pem', 'http://127.0.0.1:9000')).toBe(true);
    expect(isSnsUrl('http://127.0.0.1:9001/cert.pem', 'http://127.0.0.1:9000')).toBe(false);
  });
});

describe('snsCertificateUrl (the only certificate URLs fetched)', () => {
  it.each([
    'https://sns.us-east-1.amazonaws.com/SimpleNotificationService-9c6465fa7f48f5cacd23014631ec1136.pem',
    'https://sns.cn-north-1.amazonaws.com.cn/SimpleNotificationService-01ab.pem',
    'http://127.0.0.1:9000/SimpleNotificationService-0123.pem',
  ])('accepts %s', (url) => {
    expect(snsCertificateUrl(url, 'http://127.0.0.1:9000')).toBe(url);
  });

  it.each([
    'https://sns.us-east-1.amazonaws.com/SimpleNotificationService-0123.pem?x=1',
    'https://sns.us-east-1.amazonaws.com/SimpleNotificationService-0123.pem?',
    'https://sns.us-east-1.amazonaws.com/SimpleNotificationService-0123.pem#x',
    'https://sns.us-east-1.amazonaws.com/SimpleNotificationService-0123.pem/',
    'https://sns.us-east-1.amazonaws.com/SimpleNotificationService-test.pem',
    'https://sns.us-east-1.amazonaws.com/SimpleNotificationService-.pem',
    'https://sns.us-east-1.amazonaws.com/x/SimpleNotificationService-0123.pem',
    'https://sns.us-east-1.amazonaws.com/SimpleNotificationService-0123.pem%3Fx',
    'https://sns.us-east-1.amazonaws.com/?Action=ConfirmSubscription&Token=y',
    'https://evil.example/SimpleNotificationService-0123.pem',
  ])('refuses %s', (url) => {
    expect(snsCertificateUrl(url, undefined)).toBeUndefined();
  });
});

describe('parseSesEvents: what is refused before anything is fetched or recorded', () => {
  let keyPem: string;
  let certPem: string;
  const origin = 'http://127.0.0.1:9000';
  const certUrl = (n = 0) => `${origin}/SimpleNotificationService-${n.toString(16).padStart(4, '0')}.pem`;

  beforeAll(() => {
    ({ keyPem, certPem } = selfSignedSnsCertificate());
  });

  /** Deps whose fetches are recorded: the certificate for certificate URLs, `subscribe` otherwise. */
  function newDeps(subscribe: () => Promise<string> = () => Promise.resolve('<ok/>')) {
    const fetched: string[] = [];
    const deps: ProviderEventDeps = {
      fetchText: (url) => {
        fetched.push(url);
        return url.endsWith('.pem') ? Promise.resolve(certPem) : subscribe();
      },
      snsEndpoint: origin,
      certificateCache: certificateCache(),
      claimToken: () => Promise.resolve(true),
    };
    return { deps, fetched };
  }

  /** An SNS message signed as SNS signs it (SignatureVersion 2), fields overridable. */
  function signed(fields: Record<string, string>): Record<string, string> {
    const message: Record<string, string> = {
      Type: 'Notification',
      MessageId: randomUUID(),
      TopicArn: 'arn:aws:sns:eu-west-1:123456789012:ses-events',
      Message: '{}',
      Timestamp: new Date().toISOString(),
      SignatureVersion: '2',
      SigningCertURL: certUrl(),
      ...fields,
    };
    return signSnsMessage(message, keyPem);
  }

  function parse(message: unknown, deps: ProviderEventDeps) {
    return parseSesEvents(
      { adapterId: 'adp_1', headers: {}, body: Buffer.from(JSON.stringify(message)), config: {} },
      deps,
    );
  }

  it('accepts a fresh signed Notification', async () => {
    const { deps, fetched } = newDeps();
    expect(await parse(signed({}), deps)).toEqual([]);
    expect(fetched).toEqual([certUrl()]);
  });

  // Object.prototype's names used to be taken for a list of signed fields: a TypeError, a 500.
  it.each(['constructor', 'toString', '__proto__', 'hasOwnProperty'])(
    'refuses Type %s as an unsigned message (401)',
    async (type) => {
      const { deps, fetched } = newDeps();
      await expect(parse({ ...signed({}), Type: type }, deps)).rejects.toMatchObject({
        code: 'UNAUTHORIZED',
        statusCode: 401,
      });
      expect(fetched).toEqual([]);
    },
  );

  it('refuses a correctly signed message more than an hour old (401), fetching nothing', async () => {
    const { deps, fetched } = newDeps();
    const old = signed({ Timestamp: new Date(Date.now() - SNS_MESSAGE_MAX_AGE_MS - 60_000).toISOString() });
    await expect(parse(old, deps)).rejects.toMatchObject({ code: 'UNAUTHORIZED', statusCode: 401 });
    const undated = signed({ Timestamp: 'not a time' });
    await expect(parse(undated, deps)).rejects.toMatchObject({ code: 'UNAUTHORIZED' });
    expect(fetched).toEqual([]);
    // SNS retries for up to about an hour: a 50-minute-old retry is still accepted.
    const retry = signed({ Timestamp: new Date(Date.now() - 50 * 60_000).toISOString() });
    expect(await parse(retry, deps)).toEqual([]);
  });

  it('refuses a certificate URL with a query string or another name (401), fetching nothing', async () => {
    const { deps, fetched } = newDeps();
    for (const url of [`${certUrl()}?cachebuster=1`, `${origin}/cert.pem`, `${certUrl()}#x`]) {
      await expect(parse(signed({ SigningCertURL: url }), deps)).rejects.toMatchObject({
        code: 'UNAUTHORIZED',
      });
    }
    expect(fetched).toEqual([]);
  });

  it('keeps at most CERTIFICATE_CACHE_MAX certificates (the least recently used is fetched again)', async () => {
    const { deps, fetched } = newDeps();
    for (let n = 0; n <= CERTIFICATE_CACHE_MAX; n++)
      await parse(signed({ SigningCertURL: certUrl(n) }), deps);
    expect(deps.certificateCache.size).toBe(CERTIFICATE_CACHE_MAX);
    expect(fetched).toHaveLength(CERTIFICATE_CACHE_MAX + 1);
    await parse(signed({ SigningCertURL: certUrl(CERTIFICATE_CACHE_MAX) }), deps);
    expect(fetched).toHaveLength(CERTIFICATE_CACHE_MAX + 1);
    await parse(signed({ SigningCertURL: certUrl(0) }), deps);
    expect(fetched).toHaveLength(CERTIFICATE_CACHE_MAX + 2);
  });

  it('answers 503 SERVICE_UNAVAILABLE when the SubscribeURL cannot be fetched, without the URL or token', async () => {
    const { deps } = newDeps(() =>
      Promise.reject(new Error(`GET ${origin}/confirm?Token=secret-token answered 500`)),
    );
    const confirmation = signed({
      Type: 'SubscriptionConfirmation',
      Token: 'secret-token',
      Message: 'You have chosen to subscribe to the topic.',
      SubscribeURL: `${origin}/confirm?Action=ConfirmSubscription&Token=secret-token`,
    });
    const error = await parse(confirmation, deps).then(
      () => undefined,
      (thrown: unknown) => thrown,
    );
    expect(error).toBeInstanceOf(AppError);
    expect(error).toMatchObject({ code: 'SERVICE_UNAVAILABLE', statusCode: 503 });
    expect((error as AppError).message).not.toMatch(/secret-token|Action=|127\.0\.0\.1|http/);
    expect((error as AppError).cause).toBeUndefined();
  });
});
