import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from './config.ts';

describe('delivery configuration (issues #8, #9)', () => {
  it('defaults to throughput-sized concurrency and a 60 s send deadline', () => {
    expect(loadConfig({})).toMatchObject({
      WORKER_CONCURRENCY: 200,
      ADAPTER_MAX_CONNECTIONS: 20,
      SEND_TIMEOUT_SECONDS: 60,
    });
    expect(loadConfig({ WORKER_CONCURRENCY: '1000', SEND_TIMEOUT_SECONDS: '2' })).toMatchObject({
      WORKER_CONCURRENCY: 1000,
      SEND_TIMEOUT_SECONDS: 2,
    });
  });

  it.each([
    [{ WORKER_CONCURRENCY: '0' }, /^Invalid WORKER_CONCURRENCY: /],
    [{ WORKER_CONCURRENCY: 'many' }, /^Invalid WORKER_CONCURRENCY: /],
    [{ ADAPTER_MAX_CONNECTIONS: '0' }, /^Invalid ADAPTER_MAX_CONNECTIONS: /],
    [{ ADAPTER_MAX_CONNECTIONS: '1.5' }, /^Invalid ADAPTER_MAX_CONNECTIONS: /],
    [{ SEND_TIMEOUT_SECONDS: '0' }, /^Invalid SEND_TIMEOUT_SECONDS: /],
    [{ SEND_TIMEOUT_SECONDS: '601' }, /^Invalid SEND_TIMEOUT_SECONDS: /],
  ])('refuses %o with a one-line message naming the variable', (env, message) => {
    expect(() => loadConfig(env)).toThrow(ConfigError);
    expect(() => loadConfig(env)).toThrow(message);
  });
});
