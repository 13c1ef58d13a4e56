import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../src/app.ts';
import { createContext } from '../src/context.ts';
import { AppError } from '../src/http/errors.ts';
import { createTestContext, type TestContext } from './helpers/app.ts';
import { expectError } from './helpers/factories.ts';
import { createTeamWithKey } from './helpers/sending-team.ts';

/**
 * A batch send refused because its server is stopping (closeWithin refuses new accepts once its
 * grace ends) fails whole with 503, so its Idempotency-Key is released and the client's retry to
 * another or restarted process is sent (review finding, session 18: the refused items came back
 * inside a 202, which was stored under the key and replayed for 24 h).
 */
describe('an idempotent batch refused by a stopping server', () => {
  let ctx: TestContext;
  beforeAll(async () => {
    ctx = await createTestContext('postgres');
  });
  afterAll(() => ctx?.close());

  it('answers 503 and leaves its Idempotency-Key free for the retry', async () => {
    const team = await createTeamWithKey(ctx.app);
    const { config, database, queue, encryptionKey } = ctx.app.ctx;
    const restartedContext = await createContext({ config, database, queue, encryptionKey });
    const restarted = await buildApp(restartedContext);
    await restarted.ready();
    try {
      const batch = (app: typeof restarted) =>
        app.inject({
          method: 'POST',
          url: '/api/v1/send/batch',
          headers: { 'x-api-key': team.key, 'idempotency-key': 'stopping-batch' },
          payload: { emails: [{ templateId: team.templateId, to: 'retry@example.test' }] },
        });
      ctx.app.ctx.acceptBatcher.refuseNew(new AppError('SERVICE_UNAVAILABLE', 'The server is stopping'));
      expectError(await batch(ctx.app), 503, 'SERVICE_UNAVAILABLE');
      const retried = await batch(restarted);
      expect(retried.statusCode, retried.body).toBe(202);
      expect(retried.headers['idempotency-replayed']).toBeUndefined();
      expect(retried.json().data.results).toEqual([
        { id: expect.stringMatching(/^eml_/), jobId: expect.any(String), status: 'queued' },
      ]);
    } finally {
      await restarted.close();
      await restartedContext.close();
    }
  });
});
