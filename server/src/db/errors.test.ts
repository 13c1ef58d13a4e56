import { describe, expect, it } from 'vitest';
import { messageForLog } from './errors.ts';

describe('messageForLog', () => {
  it('drops a failed query\'s parameters (Drizzle writes them after "params:") and keeps the rest', () => {
    const failed = new Error(
      'Failed query: insert into webhook_deliveries (payload) values ($1)\nparams: {"url":"https://example.com/reset?token=SECRET-1"}',
    );
    const message = messageForLog(failed);
    expect(message).toContain('Failed query: insert into webhook_deliveries');
    expect(message).toContain('params: [redacted]');
    expect(message).not.toContain('SECRET-1');
  });

  it('passes other errors and values through', () => {
    expect(messageForLog(new Error('connect ECONNREFUSED 127.0.0.1:5432'))).toBe(
      'connect ECONNREFUSED 127.0.0.1:5432',
    );
    expect(messageForLog('plain')).toBe('plain');
  });
});
