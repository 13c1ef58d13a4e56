import type { z } from 'zod';
import { isClientDataError, isTeamForeignKeyViolation, withoutQueryParameters } from '../../db/errors.ts';
import { AppError, withoutChecksAfterTypeErrors } from '../../http/errors.ts';
import type { SendInput } from './emails.schema.ts';
import { type AcceptedSend, type AcceptSendDeps, prepareSend, templateGoneError } from './send.service.ts';
import { batchPdfBudget } from './send-pdfs.ts';

/** Most emails one `POST /api/v1/send/batch` carries. */
export const MAX_BATCH_EMAILS = 100;

/** One item's answer: accepted, or its own error envelope body. */
export type BatchItemResult =
  | AcceptedSend
  | { error: { code: string; message: string; details: Record<string, unknown> } };

function errorItem(error: AppError, index?: number): BatchItemResult {
  return { error: { code: error.code, message: error.message, details: itemDetails(error.details, index) } };
}

/**
 * `details` of item `index`'s error with each issue's `body.…` path (and `details.path`, which a PDF
 * attachment's INVALID_TEMPLATE carries) as the batch names it,
 * `body.emails.<index>.…` (README "Batch"): the send path reports a single send's paths (review
 * finding, session 16: SUBJECT_TOO_LONG said `body.subject`, TAGS_REFUSED_BY_PROVIDER
 * `body.tags.<name>`, NO_SENDER `body.from`).
 */
function itemDetails(details: AppError['details'], index: number | undefined): AppError['details'] {
  if (index === undefined) return details;
  const asItem = (path: unknown) =>
    typeof path === 'string' && (path === 'body' || path.startsWith('body.'))
      ? `body.emails.${index}${path.slice('body'.length)}`
      : path;
  const { issues, path } = details as { issues?: unknown; path?: unknown };
  return {
    ...details,
    ...(path !== undefined ? { path: asItem(path) } : {}),
    ...(Array.isArray(issues)
      ? { issues: issues.map((issue: { path?: unknown }) => ({ ...issue, path: asItem(issue?.path) })) }
      : {}),
  };
}

/** The item's answer to a database refusal of its values (what the error handler answers a single send). */
function unsupportedDataItem(): BatchItemResult {
  return errorItem(
    new AppError('INVALID_INPUT', 'The request contains text or data the database cannot store', {
      reason: 'UNSUPPORTED_DATA',
    }),
  );
}

/**
 * `POST /api/v1/send/batch` (issue #10): each of `emails` is validated with the send body schema
 * and prepared (template, adapter, rendering) like a single send; the valid ones are committed in
 * ONE transaction through the accept batcher's group-commit code ({@link GroupCommit.submitTogether}:
 * an item whose rows cannot be written fails alone). Returns one result per item, in order:
 * `{id, jobId, status}` or `{error: {code, message, details}}` (issue paths `body.emails.<i>.…`).
 * An item whose values the database refuses while it is prepared or written (SQLSTATE class 22,
 * {@link isClientDataError}) is answered INVALID_INPUT (reason UNSUPPORTED_DATA) alone; an item
 * that could not be written for a reason that is not the client's is answered INTERNAL_ERROR (the
 * others keep their outcome).
 * @throws unexpected errors while preparing (database down): then nothing was written.
 */
export async function acceptSendBatch(
  deps: AcceptSendDeps,
  caller: { teamId: string; apiKeyId: string | null },
  emails: readonly unknown[],
  schema: z.ZodType<SendInput>,
): Promise<BatchItemResult[]> {
  const results: BatchItemResult[] = new Array(emails.length);
  // Every item's PDFs are held until the one transaction: their bytes are bounded in all.
  const pdfBudget = batchPdfBudget();
  const prepared: { index: number; templateId: string; prepared: Awaited<ReturnType<typeof prepareSend>> }[] =
    [];
  await Promise.all(
    emails.map(async (raw, index) => {
      const parsed = schema.safeParse(raw);
      if (!parsed.success) {
        const issues = parsed.error.issues.map((issue) => ({
          path: ['body', 'emails', index, ...issue.path].join('.'),
          message: issue.message,
          typeError: issue.code === 'invalid_type',
        }));
        results[index] = errorItem(
          new AppError('VALIDATION_ERROR', 'Request validation failed', {
            issues: withoutChecksAfterTypeErrors(issues, (issue) => issue.typeError).map(
              ({ path, message }) => ({ path, message }),
            ),
          }),
        );
        return;
      }
      try {
        prepared.push({
          index,
          templateId: parsed.data.templateId,
          prepared: await prepareSend(deps, caller, parsed.data, {}, { pdfBudget }),
        });
      } catch (error) {
        if (error instanceof AppError) results[index] = errorItem(error, index);
        else if (isClientDataError(error)) results[index] = unsupportedDataItem();
        else throw error;
      }
    }),
  );
  prepared.sort((a, b) => a.index - b.index);
  const outcomes = await deps.acceptBatcher.submitTogether(prepared.map((item) => item.prepared.rows));
  outcomes.forEach((outcome, position) => {
    const item = prepared[position]!;
    if (outcome.status === 'fulfilled') {
      results[item.index] = item.prepared.accepted;
      return;
    }
    // The team is gone (and with it the caller's key): the whole request is refused (the error
    // handler's 401), as the key's next request will be; no item of a deleted team was written.
    if (isTeamForeignKeyViolation(outcome.reason)) throw outcome.reason;
    const error = templateGoneError(deps, outcome.reason, caller.teamId, item.templateId);
    if (error instanceof AppError) results[item.index] = errorItem(error, item.index);
    else if (isClientDataError(error)) results[item.index] = unsupportedDataItem();
    else {
      // Committed items stay committed; this one's failure is reported as the server's.
      const reason = withoutQueryParameters(error);
      console.error(
        '[send/batch] item not written:',
        reason instanceof Error ? reason.message : 'unknown error',
      );
      results[item.index] = errorItem(new AppError('INTERNAL_ERROR', 'Internal server error'));
    }
  });
  return results;
}
