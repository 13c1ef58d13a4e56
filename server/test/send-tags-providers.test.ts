import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext } from './helpers/app.ts';
import { expectError, send } from './helpers/factories.ts';
import { providerTeam } from './helpers/provider-teams.ts';

/*
 * Review finding, session 13: Amazon SES and Resend take tags of ASCII letters, digits, _ and -
 * only; `tags: {campaign: "spring sale"}` was accepted (202) and the email then ended `failed` at
 * the provider. Such a send is now refused at accept when its adapter is one of them.
 */

/** A send body through `team`'s hosted-API adapter carrying `tags`. */
function throughProvider(
  team: { templateId: string; providerAdapterId: string },
  tags: Record<string, string> | string[],
) {
  return {
    templateId: team.templateId,
    to: 'ada@example.com',
    from: 'sender@example.com',
    adapterId: team.providerAdapterId,
    tags,
  };
}

describe('tags the adapter’s provider would refuse', () => {
  let ctx: TestContext;

  beforeAll(async () => {
    ctx = await createTestContext('postgres');
  });
  afterAll(() => ctx?.close());

  for (const kind of ['ses', 'resend'] as const) {
    it(`${kind}: 400 naming the tag; a tag in the provider's alphabet is accepted`, async () => {
      const team = await providerTeam(ctx, kind);
      const body = (tags: Record<string, string>) => throughProvider(team, tags);
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

  // Review finding, session 16: Postmark's Metadata limits and SendGrid's custom_args size.
  it('postmark: more than 10 tags, a name over 20 or a value over 80 characters, names equal but for case: 400', async () => {
    const team = await providerTeam(ctx, 'postmark');
    const body = (tags: Record<string, string>) => throughProvider(team, tags);
    const many = Object.fromEntries(Array.from({ length: 11 }, (_, i) => [`t${i}`, 'v']));
    expect(
      expectError(await send(ctx.app, team.key, body(many)), 400, 'VALIDATION_ERROR').details,
    ).toMatchObject({
      reason: 'TAGS_REFUSED_BY_PROVIDER',
      issues: [{ path: 'body.tags' }],
    });
    const refused = await send(
      ctx.app,
      team.key,
      body({ a_name_of_21_letters_: 'v', long: 'x'.repeat(81), a_key: '1', A_Key: '2' }),
    );
    expect(
      expectError(refused, 400, 'VALIDATION_ERROR').details.issues.map((i: { path: string }) => i.path),
    ).toEqual(['body.tags.a_name_of_21_letters_', 'body.tags.long', 'body.tags.A_Key']);
    const accepted = await send(
      ctx.app,
      team.key,
      body({ ...Object.fromEntries(Array.from({ length: 10 }, (_, i) => [`t${i}`, 'x'.repeat(80)])) }),
    );
    expect(accepted.statusCode, accepted.body).toBe(202);
  });

  it.each<[Parameters<typeof providerTeam>[1], string[] | Record<string, string>, string]>([
    ['postmark', ['welcome', 'onboarding'], 'body.tags'],
    ['mailgun', ['welcome', 'été'], 'body.tags.1'],
    ['mailgun', { flag: '' }, 'body.tags.flag'],
    ['mailgun', Array.from({ length: 11 }, (_, i) => `t${i}`), 'body.tags'],
    ['sendgrid', Array.from({ length: 11 }, (_, i) => `t${i}`), 'body.tags'],
    ['ses', ['spring sale'], 'body.tags.0'],
    ['resend', ['ok', 'spring sale'], 'body.tags.1'],
  ])('%s: labels %j its tag field would refuse: 400 at %s', async (kind, tags, path) => {
    const team = await providerTeam(ctx, kind);
    const response = await send(ctx.app, team.key, throughProvider(team, tags));
    expect(expectError(response, 400, 'VALIDATION_ERROR').details).toMatchObject({
      reason: 'TAGS_REFUSED_BY_PROVIDER',
      issues: [{ path }],
    });
    const fine = await send(ctx.app, team.key, throughProvider(team, ['welcome']));
    expect(fine.statusCode, fine.body).toBe(202);
  });

  it('sendgrid: tags over 10,000 bytes as JSON: 400', async () => {
    const team = await providerTeam(ctx, 'sendgrid');
    const tags = Object.fromEntries(Array.from({ length: 40 }, (_, i) => [`tag_${i}`, 'é'.repeat(200)]));
    const refused = await send(ctx.app, team.key, throughProvider(team, tags));
    expect(expectError(refused, 400, 'VALIDATION_ERROR').details).toMatchObject({
      reason: 'TAGS_REFUSED_BY_PROVIDER',
      issues: [{ path: 'body.tags' }],
    });
  });
});

describe('an email larger than its provider takes', () => {
  let ctx: TestContext;

  beforeAll(async () => {
    ctx = await createTestContext('postgres');
  });
  afterAll(() => ctx?.close());

  it('postmark: 8 MB of attachments (over 10 MB base64-encoded) is 400 EMAIL_TOO_LARGE_FOR_PROVIDER; SMTP takes it', async () => {
    // Review finding, session 16: Postmark counts its 10 MB after base64, so this failed at delivery.
    const team = await providerTeam(ctx, 'postmark');
    const attachments = [{ filename: 'big.bin', content: Buffer.alloc(8_000_000, 7).toString('base64') }];
    const body = {
      templateId: team.templateId,
      to: 'ada@example.com',
      from: 'sender@example.com',
      attachments,
    };
    const refused = await send(ctx.app, team.key, { ...body, adapterId: team.providerAdapterId });
    expect(expectError(refused, 400, 'FILE_TOO_LARGE').details).toMatchObject({
      reason: 'EMAIL_TOO_LARGE_FOR_PROVIDER',
      adapterType: 'mailapi_server',
      maxBytes: 10_000_000,
    });
    const small = await send(ctx.app, team.key, {
      ...body,
      adapterId: team.providerAdapterId,
      attachments: [{ filename: 'small.bin', content: Buffer.alloc(7_000_000, 7).toString('base64') }],
    });
    expect(small.statusCode, small.body).toBe(202);
    const smtp = await send(ctx.app, team.key, body);
    expect(smtp.statusCode, smtp.body).toBe(202);
  });
});
