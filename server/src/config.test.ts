import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from './config.ts';
import { resolveEncryptionKey } from './encryption-key.ts';

describe('loadConfig', () => {
  it('applies the documented defaults', () => {
    const config = loadConfig({});
    expect(config).toMatchObject({
      PORT: 3000,
      BASE_URL: 'http://localhost:3000',
      DATA_DIR: './data',
      LOG_LEVEL: 'info',
    });
    expect(config.DATABASE_URL).toBeUndefined();
    expect(config.REDIS_URL).toBeUndefined();
  });

  it('derives BASE_URL from PORT and strips a trailing slash', () => {
    expect(loadConfig({ PORT: '8080' }).BASE_URL).toBe('http://localhost:8080');
    expect(loadConfig({ BASE_URL: 'https://mail.example.com/' }).BASE_URL).toBe('https://mail.example.com');
  });

  it.each([
    [{ PORT: 'eighty' }, /^Invalid PORT: /],
    [{ PORT: '70000' }, /^Invalid PORT: /],
    [{ BASE_URL: 'not a url' }, /^Invalid BASE_URL: /],
    [{ DATABASE_URL: 'mysql://x' }, /^Invalid DATABASE_URL: /],
    [{ ENCRYPTION_KEY: 'short' }, /^Invalid ENCRYPTION_KEY: /],
    [{ LOG_LEVEL: 'loud' }, /^Invalid LOG_LEVEL: /],
    [{ REDIS_URL: 'http://x' }, /^Invalid REDIS_URL: /],
    [{ SETUP_TOKEN: 'short' }, /^Invalid SETUP_TOKEN: /],
    [{ SMTP_ALLOW_PRIVATE: 'yes' }, /^Invalid SMTP_ALLOW_PRIVATE: /],
  ])('refuses %o with a one-line message naming the variable', (env, message) => {
    let error: unknown;
    try {
      loadConfig(env);
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as Error).message).toMatch(message);
    expect((error as Error).message).not.toContain('\n');
  });

  it('refuses private SMTP destinations unless SMTP_ALLOW_PRIVATE is true (issue #8)', () => {
    expect(loadConfig({}).SMTP_ALLOW_PRIVATE).toBe(false);
    expect(loadConfig({ SMTP_ALLOW_PRIVATE: '' }).SMTP_ALLOW_PRIVATE).toBe(false);
    expect(loadConfig({ SMTP_ALLOW_PRIVATE: 'true' }).SMTP_ALLOW_PRIVATE).toBe(true);
  });

  it('requires ENCRYPTION_KEY with DATABASE_URL', () => {
    expect(() => loadConfig({ DATABASE_URL: 'postgres://localhost/db' })).toThrow(
      /^Invalid ENCRYPTION_KEY: required/,
    );
    const key = Buffer.alloc(32, 1).toString('base64');
    expect(loadConfig({ DATABASE_URL: 'postgres://localhost/db', ENCRYPTION_KEY: key }).ENCRYPTION_KEY).toBe(
      key,
    );
  });
});

describe('loadConfig refuses unusable URLs with a ConfigError naming the variable (no stack trace)', () => {
  // Review finding, session 15: these threw a TypeError or URIError, one of them only after start-up.
  const key = Buffer.alloc(32, 1).toString('base64');
  it.each([
    ['OIDC_ISSUER', { OIDC_ISSUER: 'not a url', OIDC_CLIENT_ID: 'a', OIDC_CLIENT_SECRET: 'b' }],
    ['PDF_RENDERER_URL', { PDF_RENDERER_URL: 'http://u:pa%zz@127.0.0.1:3000' }],
    ['DATABASE_URL', { DATABASE_URL: 'postgres://u:secret@localhost:99999/db', ENCRYPTION_KEY: key }],
  ])('%s', (name, env) => {
    let thrown: unknown;
    try {
      loadConfig(env);
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(ConfigError);
    expect((thrown as Error).message).toMatch(new RegExp(`^Invalid ${name}: `));
    expect((thrown as Error).message).not.toContain('secret');
  });
});

describe('loadConfig with PORT=0', () => {
  it('requires BASE_URL (the links and the sign-in origin cannot name a port not yet known)', () => {
    expect(() => loadConfig({ PORT: '0' })).toThrow(/^Invalid BASE_URL: required when PORT is 0/);
    expect(loadConfig({ PORT: '0', BASE_URL: 'http://127.0.0.1:3000/' }).BASE_URL).toBe(
      'http://127.0.0.1:3000',
    );
  });
});

describe('loadConfig refuses an unusable BASE_URL, HOST or PORT before start-up (review finding, session 18)', () => {
  // BASE_URL without http(s):// started, then every sign-in answered 500; a bad HOST failed in
  // listen with a stack trace; PORT=' ' became 0 (the error named BASE_URL) and PORT=0x50 port 80.
  const messageOf = (env: Record<string, string>) => {
    try {
      loadConfig(env);
    } catch (error) {
      expect(error).toBeInstanceOf(ConfigError);
      return (error as Error).message;
    }
    return 'accepted';
  };

  it.each([
    ['postwright.example.com:3000', /^Invalid BASE_URL: must be an http:\/\/ or https:\/\/ URL/],
    ['ftp://postwright.example.com', /^Invalid BASE_URL: must be an http:\/\/ or https:\/\/ URL/],
    ['javascript:alert(1)', /^Invalid BASE_URL: must be an http:\/\/ or https:\/\/ URL/],
    ['https://postwright.example.com/?tenant=1', /^Invalid BASE_URL: must not have a query/],
    ['https://postwright.example.com/#top', /^Invalid BASE_URL: must not have a query/],
  ])('BASE_URL=%s', (value, message) => {
    expect(messageOf({ BASE_URL: value })).toMatch(message);
  });

  it('accepts http(s) BASE_URLs with a port or a path', () => {
    expect(loadConfig({ BASE_URL: 'https://mail.example.com:8443/postwright/' }).BASE_URL).toBe(
      'https://mail.example.com:8443/postwright',
    );
    expect(loadConfig({ BASE_URL: 'http://127.0.0.1:3000' }).BASE_URL).toBe('http://127.0.0.1:3000');
  });

  it.each(['not a host', 'a..b', '-leading.example', '[::1]', 'http://example.com', 'host:3000'])(
    'HOST=%s',
    (value) => {
      expect(messageOf({ HOST: value })).toMatch(/^Invalid HOST: must be an IP address/);
    },
  );

  it.each([
    '0.0.0.0',
    '127.0.0.1',
    '::',
    '::1',
    'localhost',
    'postwright-1.internal.example.com',
    'compose_app',
  ])('accepts HOST=%s', (value) => {
    expect(loadConfig({ HOST: value }).HOST).toBe(value);
  });

  it.each([' ', '0x50', '1e3', '-1', '80.0', '+80', '65536'])('PORT=%j', (value) => {
    expect(messageOf({ PORT: value, BASE_URL: 'http://localhost:3000' })).toMatch(
      /^Invalid PORT: must be a whole number from 0 to 65535$/,
    );
  });

  it('reads PORT as a decimal number', () => {
    expect(loadConfig({ PORT: '8080' }).PORT).toBe(8080);
    expect(loadConfig({ PORT: '65535' }).PORT).toBe(65535);
    expect(loadConfig({}).PORT).toBe(3000);
  });
});

describe('resolveEncryptionKey', () => {
  it('generates a key once in DATA_DIR and reads the same key afterwards', () => {
    const dataDir = mkdtempSync(path.join(tmpdir(), 'postwright-key-'));
    try {
      const first = resolveEncryptionKey({ DATA_DIR: dataDir, ENCRYPTION_KEY: undefined });
      expect(first).toHaveLength(32);
      const file = path.join(dataDir, 'encryption.key');
      expect(statSync(file).mode & 0o777).toBe(0o600);
      expect(Buffer.from(readFileSync(file, 'utf8').trim(), 'base64').equals(first)).toBe(true);
      expect(resolveEncryptionKey({ DATA_DIR: dataDir, ENCRYPTION_KEY: undefined }).equals(first)).toBe(true);
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });

  it('uses ENCRYPTION_KEY when set', () => {
    const key = Buffer.alloc(32, 9);
    expect(
      resolveEncryptionKey({ DATA_DIR: '/nonexistent', ENCRYPTION_KEY: key.toString('base64') }).equals(key),
    ).toBe(true);
  });
});
