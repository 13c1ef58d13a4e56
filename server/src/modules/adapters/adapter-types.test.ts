import { describe, expect, it } from 'vitest';
import type { z } from 'zod';
import { AppError } from '../../http/errors.ts';
import { PROVIDERS } from '../../providers/index.ts';
import {
  ADAPTER_TYPE_DESCRIPTORS,
  ADAPTER_TYPES,
  type AdapterConfigField,
  type AdapterType,
  MAILAPI_CLOUD_REGIONS,
  MAILAPI_DOMAIN_REGIONS,
  parseAdapterConfig,
} from './adapter-types.ts';

const validSmtp = { host: 'smtp.example.com', port: 587, secure: false, username: 'u', password: 'p' };

/** The `details.issues` of the AppError that parseAdapterConfig throws for `config`. */
function issuesFor(type: AdapterType, config: unknown): { path: string; message: string }[] {
  try {
    parseAdapterConfig(type, config);
  } catch (error) {
    expect(error).toBeInstanceOf(AppError);
    const appError = error as AppError;
    expect(appError.code).toBe('VALIDATION_ERROR');
    expect(appError.message).toBe('Invalid adapter config');
    return appError.details.issues as { path: string; message: string }[];
  }
  throw new Error('expected parseAdapterConfig to throw');
}

describe('parseAdapterConfig', () => {
  it('accepts a valid smtp config, and one with only host and port', () => {
    expect(parseAdapterConfig('smtp', validSmtp)).toEqual(validSmtp);
    expect(parseAdapterConfig('smtp', { host: 'mail.local', port: 25 })).toEqual({
      host: 'mail.local',
      port: 25,
    });
  });

  it('reports a missing host at config.host', () => {
    const issues = issuesFor('smtp', { port: 587 });
    expect(issues).toEqual([{ path: 'config.host', message: 'Required' }]);
  });

  it.each([70000, 0, 587.5, '587'])('rejects port %j at config.port', (port) => {
    expect(issuesFor('smtp', { ...validSmtp, port }).map((i) => i.path)).toEqual(['config.port']);
  });

  it('rejects unknown keys, one issue per key', () => {
    const issues = issuesFor('smtp', { ...validSmtp, starttls: true, pool: 3 });
    expect(issues.map((i) => i.path).sort()).toEqual(['config.pool', 'config.starttls']);
  });

  it('accepts tls "auto" and "none", and refuses "none" with secure: true (issue #8)', () => {
    expect(parseAdapterConfig('smtp', { ...validSmtp, tls: 'none' }).tls).toBe('none');
    expect(parseAdapterConfig('smtp', { ...validSmtp, tls: 'auto' }).tls).toBe('auto');
    expect(issuesFor('smtp', { ...validSmtp, tls: true }).map((i) => i.path)).toEqual(['config.tls']);
    expect(issuesFor('smtp', { ...validSmtp, secure: true, tls: 'none' })).toEqual([
      {
        path: 'config.tls',
        message: '"none" cannot be combined with secure: true (TLS from the first byte)',
      },
    ]);
  });

  it('rejects a config that is not an object at config', () => {
    expect(issuesFor('smtp', 'smtp://host').map((i) => i.path)).toEqual(['config']);
  });

  it('rejects an unknown type at type', () => {
    expect(issuesFor('carrier_pigeon' as AdapterType, {}).map((i) => i.path)).toEqual(['type']);
  });

  it('defaults the mailapi_domain region to us and accepts only us or eu', () => {
    expect(parseAdapterConfig('mailapi_domain', { apiKey: 'k', domain: 'mg.example.com' })).toEqual({
      apiKey: 'k',
      domain: 'mg.example.com',
      region: 'us',
    });
    expect(parseAdapterConfig('mailapi_domain', { apiKey: 'k', domain: 'd', region: 'eu' }).region).toBe(
      'eu',
    );
    expect(
      issuesFor('mailapi_domain', { apiKey: 'k', domain: 'd', region: 'ap' }).map((i) => i.path),
    ).toEqual(['config.region']);
  });

  it('requires one of the six listed regions for mailapi_cloud', () => {
    const base = { accessKeyId: 'AKIA', secretAccessKey: 's' };
    expect(parseAdapterConfig('mailapi_cloud', { ...base, region: 'ap-southeast-2' }).region).toBe(
      'ap-southeast-2',
    );
    expect(issuesFor('mailapi_cloud', base).map((i) => i.path)).toEqual(['config.region']);
    expect(issuesFor('mailapi_cloud', { ...base, region: 'us-east-2' }).map((i) => i.path)).toEqual([
      'config.region',
    ]);
  });

  it.each([
    ['mailapi_a', 'apiKey'],
    ['mailapi_b', 'apiKey'],
    ['mailapi_server', 'serverToken'],
  ] as const)('requires %s.%s as a non-empty string', (type, field) => {
    expect(parseAdapterConfig(type, { [field]: 'secret' })).toEqual({ [field]: 'secret' });
    expect(issuesFor(type, { [field]: '' }).map((i) => i.path)).toEqual([`config.${field}`]);
  });
});

describe('ADAPTER_TYPE_DESCRIPTORS', () => {
  it('describes every adapter type once, in order, with a name and description', () => {
    expect(ADAPTER_TYPE_DESCRIPTORS.map((d) => d.type)).toEqual([...ADAPTER_TYPES]);
    for (const descriptor of ADAPTER_TYPE_DESCRIPTORS) {
      expect(descriptor.name).not.toBe('');
      expect(descriptor.description.length).toBeGreaterThan(20);
    }
    expect(Object.fromEntries(ADAPTER_TYPE_DESCRIPTORS.map((d) => [d.type, d.name]))).toEqual({
      mailapi_a: 'Resend',
      mailapi_b: 'SendGrid',
      mailapi_domain: 'Mailgun',
      mailapi_cloud: 'Amazon SES',
      mailapi_server: 'Postmark',
      smtp: 'SMTP',
    });
  });

  it('offers exactly the spec regions as select options', () => {
    const options = (type: AdapterType) =>
      ADAPTER_TYPE_DESCRIPTORS.find((d) => d.type === type)?.configFields.find((f) => f.name === 'region')
        ?.options;
    expect(options('mailapi_domain')).toEqual([...MAILAPI_DOMAIN_REGIONS]);
    expect(options('mailapi_cloud')).toEqual([...MAILAPI_CLOUD_REGIONS]);
  });

  it.each(ADAPTER_TYPE_DESCRIPTORS.map((d) => [d.type, d] as const))(
    '%s: fields, required flags and options agree with the schema',
    (type, descriptor) => {
      const schema = PROVIDERS[type].configSchema as unknown as z.ZodObject;
      expect(descriptor.configFields.map((f) => f.name).sort()).toEqual(Object.keys(schema.shape).sort());

      // The schema's required keys are the ones an empty config is reported missing.
      const empty = schema.safeParse({});
      const missing = empty.success ? [] : empty.error.issues.map((i) => String(i.path[0]));
      const required = descriptor.configFields.filter((f) => f.required).map((f) => f.name);
      expect(required.sort()).toEqual(missing.sort());

      const shape: Record<string, { safeParse(v: unknown): { success: boolean } }> = schema.shape;
      for (const field of descriptor.configFields) {
        expect(field.label).not.toBe('');
        expect(typeof field.placeholder).toBe('string');
        // The form control's kind produces values the field's schema accepts.
        expect(shape[field.name]?.safeParse(sampleValue(field)).success).toBe(true);
        if (field.type !== 'select') {
          expect(field.options).toBeUndefined();
          continue;
        }
        // Every offered option is accepted, and a value outside them is not.
        expect(field.options?.length).toBeGreaterThan(0);
        const withoutField = { ...validConfigFor(type) };
        for (const option of field.options ?? []) {
          expect(schema.safeParse({ ...withoutField, [field.name]: option }).success).toBe(true);
        }
        expect(schema.safeParse({ ...withoutField, [field.name]: 'not-an-option' }).success).toBe(false);
      }
    },
  );
});

/** A value the dashboard control of `field` would submit. */
function sampleValue(field: AdapterConfigField): unknown {
  if (field.type === 'number') return 25;
  if (field.type === 'boolean') return true;
  if (field.type === 'select') return field.options?.[0];
  return 'x';
}

/** A config with a string for every required field, built from the descriptor itself. */
function validConfigFor(type: AdapterType): Record<string, unknown> {
  const descriptor = ADAPTER_TYPE_DESCRIPTORS.find((d) => d.type === type)!;
  return Object.fromEntries(
    descriptor.configFields.filter((f) => f.required).map((f) => [f.name, sampleValue(f)]),
  );
}
