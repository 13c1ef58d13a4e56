import { Alert, Button, Center, CopyButton, Group, Loader, Stack, Text, Title } from '@mantine/core';
import { notifications } from '@mantine/notifications';
import type { ReactNode } from 'react';
import { ApiError } from './api/client';

/**
 * An API error's message instead of a blank page. A 403 naming a missing permission
 * (`details.permission`) says the role does not allow it; other 403s (`WRONG_ACCOUNT`,
 * `TEAM_ACCESS_REVOKED`, …) are not about the role and show their own message (review finding,
 * dashboard session: "Your role … does not allow this (This invitation is for another email
 * address)"). A 409 `TEAM_SWITCHED` says nothing was done (team-sync.ts reloads the page's team).
 */
export function ErrorAlert({ error, title }: { error: unknown; title?: string }) {
  if (!error) return null;
  if (error instanceof ApiError && error.status === 403) {
    return (
      <Alert color="orange" title="Not allowed" role="alert">
        {error.details?.permission
          ? `Your role in this team does not allow this (${error.message}). Ask an owner or admin for access.`
          : error.message}
      </Alert>
    );
  }
  if (error instanceof ApiError && error.details?.reason === 'TEAM_SWITCHED') {
    return (
      <Alert color="orange" title="Team switched" role="alert">
        {error.message}: nothing was changed. Check the team this page now shows and try again.
      </Alert>
    );
  }
  const message = error instanceof Error ? error.message : String(error);
  return (
    <Alert color="red" title={title ?? 'Something went wrong'} role="alert">
      {message}
      {error instanceof ApiError && error.details?.issues?.length ? (
        <ul>
          {error.details.issues.map((i) => (
            <li key={i.path + i.message}>
              {i.path ? `${i.path}: ` : ''}
              {i.message}
            </li>
          ))}
        </ul>
      ) : null}
    </Alert>
  );
}

/** Field errors of a 400 answer, keyed by the issue path. */
export function fieldErrors(error: unknown): Record<string, string> {
  return error instanceof ApiError ? error.fieldErrors() : {};
}

export function Loading() {
  return (
    <Center p="xl">
      <Loader aria-label="Loading" />
    </Center>
  );
}

export function PageTitle({ children, actions }: { children: ReactNode; actions?: ReactNode }) {
  return (
    <Group justify="space-between" mb="md">
      <Title order={2}>{children}</Title>
      {actions}
    </Group>
  );
}

export function EmptyState({ children }: { children: ReactNode }) {
  return (
    <Stack align="center" p="xl">
      <Text c="dimmed">{children}</Text>
    </Stack>
  );
}

export function Copy({ value, label = 'Copy' }: { value: string; label?: string }) {
  return (
    <CopyButton value={value}>
      {({ copied, copy }) => (
        <Button size="xs" variant="light" onClick={copy}>
          {copied ? 'Copied' : label}
        </Button>
      )}
    </CopyButton>
  );
}

export function notifyError(error: unknown) {
  notifications.show({
    color: 'red',
    title: 'Error',
    message: error instanceof Error ? error.message : String(error),
  });
}

export function notifyOk(message: string) {
  notifications.show({ color: 'green', message });
}

export function formatDate(value: string | null | undefined): string {
  return value ? new Date(value).toLocaleString() : '—';
}

/**
 * A small table-row action that asks `question` (the browser's confirm dialog) before `onConfirm`:
 * red and subtle for destructive actions (`danger`), light otherwise.
 */
export function ConfirmButton({
  question,
  onConfirm,
  danger = false,
  children,
}: {
  question: string;
  onConfirm: () => void;
  danger?: boolean;
  children: ReactNode;
}) {
  return (
    <Button
      size="xs"
      {...(danger ? { color: 'red', variant: 'subtle' } : { variant: 'light' })}
      onClick={() => window.confirm(question) && onConfirm()}
    >
      {children}
    </Button>
  );
}

/**
 * The dashboard's form shape: submitting runs `mutation` (no page reload); its error (or `error`,
 * when the form also depends on a load) shows above the fields, and the submit button labelled
 * `submitLabel` shows the mutation's pending state.
 */
export function MutationForm({
  mutation,
  submitLabel,
  error,
  children,
}: {
  mutation: { mutate: () => void; isPending: boolean; error: unknown };
  submitLabel: ReactNode;
  error?: unknown;
  children: ReactNode;
}) {
  return (
    <form
      onSubmit={(event) => {
        event.preventDefault();
        mutation.mutate();
      }}
    >
      <Stack>
        <ErrorAlert error={error ?? mutation.error} />
        {children}
        <Button type="submit" loading={mutation.isPending}>
          {submitLabel}
        </Button>
      </Stack>
    </form>
  );
}
