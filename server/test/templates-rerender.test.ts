import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createTestContext, type TestContext, waitFor } from './helpers/app.ts';
import { addTeamMember, setupOwner, type TeamOwner } from './helpers/auth.ts';
import {
  buildApiKey,
  buildSmtpAdapter,
  buildTemplate,
  dashboardCall,
  dataOf,
  expectError,
  restoreTemplateVersion,
  send,
  simpleDesign,
  templateVersionsOf,
} from './helpers/factories.ts';
import { startTestSmtpServer, type TestSmtpServer } from './helpers/smtp-server.ts';

type Method = 'GET' | 'POST' | 'PUT' | 'DELETE';
type User = { cookie: string };

/**
 * Issue #4 "Done means": a log always re-renders exactly to what was sent, whatever happened to
 * its template afterwards (edit, restore, delete). Real SMTP, real workers.
 */
describe('re-rendering logs from their template version', () => {
  let ctx: TestContext;
  let owner: TeamOwner;
  let smtp: TestSmtpServer;
  let key: string;
  const call = (user: User, method: Method, url: string, payload?: object) =>
    dashboardCall(ctx.app, user, method, url, payload);
  const data = dataOf;
  const versionsOf = (user: User, ref: string) => templateVersionsOf(ctx.app, user, ref);
  const restore = (user: User, ref: string, versionId: string) =>
    restoreTemplateVersion(ctx.app, user, ref, versionId);

  beforeAll(async () => {
    ctx = await createTestContext('postgres');
    smtp = await startTestSmtpServer();
    await ctx.startWorkers();
  });
  // Every case gets a team of its own (CONVENTIONS.md); the app and database are the file's.
  beforeEach(async () => {
    owner = await setupOwner(ctx.app);
    key = (await buildApiKey(ctx.app, owner)).key;
    await buildSmtpAdapter(ctx.app, owner, smtp.port);
  });
  afterAll(async () => {
    await ctx?.close();
    await smtp?.close();
  });

  const variables = { first_name: 'Ada', order: { id: 42 } };
  const sendTo = async (templateId: string, recipient: string) => {
    const response = await send(ctx.app, key, { templateId, to: recipient, variables });
    expect(response.statusCode, response.body).toBe(202);
    const message = await waitFor(
      async () => smtp.messages.find((m) => m.envelopeTo.includes(recipient)),
      20_000,
      `the message to ${recipient}`,
    );
    return { emailId: response.json().data.id as string, parsed: message.parsed };
  };
  const rerender = async (emailId: string) => data(await call(owner, 'GET', `/api/logs/${emailId}/rendered`));
  const logOf = async (emailId: string) => data(await call(owner, 'GET', `/api/logs/${emailId}`));
  const preview = async (ref: string) =>
    data(await call(owner, 'POST', `/api/templates/${ref}/preview`, { variables }));

  it('sends, edits, restores and sends again: every log re-renders to exactly what was sent', async () => {
    const created = await buildTemplate(ctx.app, owner, {
      name: 'Receipt',
      subject: 'Receipt {{ order.id }} for {{ first_name }}',
      designJson: simpleDesign('Thanks {{ first_name }}, order {{ order.id }} is confirmed.'),
    });
    const [version1] = await versionsOf(owner, created.id);
    const previewBefore = await preview(created.id);

    const first = await sendTo(created.id, 'first@example.test');
    expect(first.parsed.subject).toBe('Receipt 42 for Ada');
    expect(first.parsed.html).toContain('Thanks Ada, order 42 is confirmed.');

    const edit = await call(owner, 'PUT', `/api/templates/${created.id}`, {
      subject: 'Your updated receipt, {{ first_name }}',
      designJson: simpleDesign('Edited text for {{ first_name }}'),
    });
    expect(edit.statusCode, edit.body).toBe(200);
    const previewEdited = await preview(created.id);
    const second = await sendTo(created.slug, 'second@example.test');
    expect(second.parsed.subject).toBe('Your updated receipt, Ada');
    expect(second.parsed.html).toContain('Edited text for Ada');

    await data(await restore(owner, created.id, version1.id));
    const third = await sendTo(created.id, 'third@example.test');

    const sent = [first, second, third];
    const logs = await Promise.all(sent.map((s) => logOf(s.emailId)));
    const rendered = await Promise.all(sent.map((s) => rerender(s.emailId)));
    for (const [index, message] of sent.entries()) {
      expect(Object.keys(rendered[index]).sort()).toEqual(['html', 'subject', 'text']);
      expect(rendered[index].html).toBe(message.parsed.html);
      expect(rendered[index].subject).toBe(message.parsed.subject);
      expect(rendered[index].subject).toBe(logs[index].subject);
      expect(rendered[index].text.trim()).toBe((message.parsed.text ?? '').trim());
    }
    // Preview renders exactly as a send does, unversioned edits included.
    expect(previewBefore.html).toBe(first.parsed.html);
    expect(previewEdited.html).toBe(second.parsed.html);
    expect(previewEdited.subject).toBe(second.parsed.subject);

    // The first and third emails share content; the edited one differs.
    expect(rendered[2]).toEqual(rendered[0]);
    expect(rendered[1].html).not.toBe(rendered[0].html);
    expect(rendered[1].subject).not.toBe(rendered[0].subject);

    // Three different immutable versions: Version 1, the one snapshotted by the send after the
    // edit, and the restore's own.
    const names = (await versionsOf(owner, created.id)).map((v: { id: string; name: string }) => [
      v.id,
      v.name,
    ]);
    expect(names).toEqual([
      [logs[2].templateVersionId, 'Restored from Version 1'],
      [logs[1].templateVersionId, 'Version 2'],
      [logs[0].templateVersionId, 'Version 1'],
    ]);

    // Deleting the template keeps its versions: the logs still re-render.
    const removed = await call(owner, 'DELETE', `/api/templates/${created.id}`);
    expect(removed.statusCode, removed.body).toBe(200);
    expect(await rerender(first.emailId)).toEqual(rendered[0]);
    expect(await rerender(second.emailId)).toEqual(rendered[1]);
  });

  it('re-renders only the team’s own logs, for logs:view holders', async () => {
    const created = await buildTemplate(ctx.app, owner, { name: 'Private receipt' });
    const { emailId } = await sendTo(created.id, 'private@example.test');
    const viewer = await addTeamMember(ctx.app, owner, 'viewer');
    expect((await data(await call(viewer, 'GET', `/api/logs/${emailId}/rendered`))).subject).toBe('Hi Ada');
    const stranger = await setupOwner(ctx.app);
    expectError(await call(stranger, 'GET', `/api/logs/${emailId}/rendered`), 404, 'NOT_FOUND');
    expectError(
      await call(owner, 'GET', '/api/logs/eml_01h455vb4pex5vsknk084sn02q/rendered'),
      404,
      'NOT_FOUND',
    );
    expectError(
      await ctx.app.inject({ method: 'GET', url: `/api/logs/${emailId}/rendered` }),
      401,
      'UNAUTHORIZED',
    );
  });
});
