import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from './config.ts';

/** The operator's base-URL overrides of the hosted email APIs (issue #10). */
describe('PROVIDER_ENDPOINT_* variables', () => {
  const names = [
    'PROVIDER_ENDPOINT_RESEND',
    'PROVIDER_ENDPOINT_SENDGRID',
    'PROVIDER_ENDPOINT_MAILGUN',
    'PROVIDER_ENDPOINT_SES',
    'PROVIDER_ENDPOINT_POSTMARK',
  ] as const;

  it.each(names)('%s is unset by default and takes an http(s) base URL', (name) => {
    expect(loadConfig({})[name]).toBeUndefined();
    expect(loadConfig({ [name]: 'http://127.0.0.1:4010' })[name]).toBe('http://127.0.0.1:4010');
    expect(loadConfig({ [name]: 'https://api.eu.example.com/v1' })[name]).toBe(
      'https://api.eu.example.com/v1',
    );
  });

  it.each(names)('%s refuses a non-URL and a non-http scheme, naming the variable', (name) => {
    for (const value of ['not a url', 'ftp://files.example.com']) {
      expect(() => loadConfig({ [name]: value })).toThrow(ConfigError);
      expect(() => loadConfig({ [name]: value })).toThrow(new RegExp(`^Invalid ${name}: `));
    }
  });
});
