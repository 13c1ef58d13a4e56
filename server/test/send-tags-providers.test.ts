import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from './helpers/app.ts';
import { expectError, send } from './helpers/factories.ts';
import { providerTeam } from './helpers/provider-teams.ts';

/*
 * Review finding, session 13: Amazon SES and Resend take tags of ASCII letters, digits, _ and -
 * only; `tags: {campaign: "spring sale"}` was accepted (202) and the email then ended `failed` at
 * the provider. Such a send is now refused at accept when its adapter is one of them.
 */
describe('tags the adapter’s provider would refuse', () => {
  let ctx: TestContext;

  beforeAll(async () => {
    ctx = await createTestContext('postgres');
  });
  afterAll(() => ctx?.close());

  for (const kind of ['ses', 'resend'] as const) {
    it(`${kind}: 400 naming the tag; a tag in the provider's alphabet is accepted`, async () => {
      const team = await providerTeam(ctx, kind);
      const body = (tags: Record<string, string>) => ({
        templateId: team.templateId,
        to: 'ada@example.com',
        from: 'sender@example.com',
        adapterId: team.providerAdapterId,
        tags,
      });
      const refused = await send(ctx.app, team.key, body({ campaign: 'spring sale', ok: 'fine' }));
      expect(expectError(refused, 400, 'VALIDATION_ERROR').details).toMatchObject({
        reason: 'TAGS_REFUSED_BY_PROVIDER',
        issues: [{ path: 'body.tags.campaign' }],
      });
      const accepted = await send(ctx.app, team.key, body({ campaign: 'spring-sale_2' }));
      expect(accepted.statusCode, accepted.body).toBe(202);
      // Other providers take any header-safe tag: the team's SMTP adapter, by default.
      const smtp = await send(ctx.app, team.key, {
        templateId: team.templateId,
        to: 'ada@example.com',
        tags: { campaign: 'spring sale' },
      });
      expect(smtp.statusCode, smtp.body).toBe(202);
    });
  }
});
