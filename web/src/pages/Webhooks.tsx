import {
  Alert,
  Badge,
  Button,
  Checkbox,
  Code,
  Group,
  Modal,
  Paper,
  Stack,
  Table,
  Text,
  TextInput,
  Title,
} from '@mantine/core';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { api, unwrap } from '../api/client';
import type { paths } from '../api/schema';
import { useCan } from '../session';
import {
  ConfirmButton,
  Copy,
  EmptyState,
  ErrorAlert,
  fieldErrors,
  formatDate,
  Loading,
  MutationForm,
  notifyError,
  notifyOk,
  PageTitle,
} from '../ui';
import { STATUSES } from './Logs';

type Webhook = paths['/api/webhooks']['get']['responses'][200]['content']['application/json']['data'][number];
type Events = NonNullable<
  paths['/api/webhooks']['post']['requestBody']
>['content']['application/json']['events'];
/** `email.<status>` for each status, in the order of the log statuses (one list: Logs.tsx). */
const EVENTS = STATUSES.map((status) => `email.${status}` as const) satisfies Events;

/** Webhooks: list, create (secret shown once), rotate, test, deliveries with redeliver. */
export function WebhooksPage() {
  const can = useCan();
  const queryClient = useQueryClient();
  const hooks = useQuery({ queryKey: ['webhooks'], queryFn: () => unwrap(api.GET('/api/webhooks')) });
  const [creating, setCreating] = useState(false);
  const [secret, setSecret] = useState<string | null>(null);
  const [open, setOpen] = useState<Webhook | null>(null);
  const invalidate = () => queryClient.invalidateQueries({ queryKey: ['webhooks'] });
  const path = (id: string) => ({ params: { path: { id } } });
  const rotate = useMutation({
    mutationFn: (id: string) => unwrap(api.POST('/api/webhooks/{id}/rotate-secret', path(id))),
    onSuccess: (r) => setSecret((r as { secret: string }).secret),
    onError: notifyError,
  });
  const test = useMutation({
    mutationFn: (id: string) => unwrap(api.POST('/api/webhooks/{id}/test', path(id))),
    onSuccess: () => {
      notifyOk('Test event sent');
      queryClient.invalidateQueries({ queryKey: ['deliveries'] });
    },
    onError: notifyError,
  });
  const toggle = useMutation({
    mutationFn: (w: Webhook) =>
      unwrap(api.PUT('/api/webhooks/{id}', { ...path(w.id), body: { isActive: !w.isActive } })),
    onSuccess: invalidate,
    onError: notifyError,
  });
  const remove = useMutation({
    mutationFn: (id: string) => unwrap(api.DELETE('/api/webhooks/{id}', path(id))),
    onSuccess: invalidate,
    onError: notifyError,
  });
  if (hooks.isPending) return <Loading />;
  if (hooks.error)
    return (
      <>
        <PageTitle>Webhooks</PageTitle>
        <ErrorAlert error={hooks.error} />
      </>
    );
  return (
    <>
      <PageTitle
        actions={can('webhooks:create') && <Button onClick={() => setCreating(true)}>New webhook</Button>}
      >
        Webhooks
      </PageTitle>
      {hooks.data.length === 0 ? (
        <EmptyState>
          No webhook yet: add an HTTPS endpoint to be told when emails are sent, delivered, opened or fail.
        </EmptyState>
      ) : (
        <Table.ScrollContainer minWidth={800}>
          <Table striped>
            <Table.Thead>
              <Table.Tr>
                <Table.Th>Name</Table.Th>
                <Table.Th>URL</Table.Th>
                <Table.Th>Events</Table.Th>
                <Table.Th>Status</Table.Th>
                <Table.Th>Actions</Table.Th>
              </Table.Tr>
            </Table.Thead>
            <Table.Tbody>
              {hooks.data.map((w) => (
                <Table.Tr key={w.id}>
                  <Table.Td>{w.name}</Table.Td>
                  <Table.Td style={{ wordBreak: 'break-all' }}>{w.url}</Table.Td>
                  <Table.Td>{w.events.join(', ')}</Table.Td>
                  <Table.Td miw={110}>
                    {w.isActive ? <Badge color="green">active</Badge> : <Badge color="red">disabled</Badge>}
                    {w.disabledReason && (
                      <Text size="xs" c="red">
                        {w.disabledReason}
                      </Text>
                    )}
                    {w.consecutiveFailures > 0 && (
                      <Text size="xs" c="orange">
                        {w.consecutiveFailures} failures in a row
                      </Text>
                    )}
                  </Table.Td>
                  <Table.Td>
                    <Group gap="xs">
                      <Button size="xs" variant="default" onClick={() => setOpen(w)}>
                        Deliveries
                      </Button>
                      {can('webhooks:update') && (
                        <>
                          <Button size="xs" variant="light" onClick={() => test.mutate(w.id)}>
                            Test
                          </Button>
                          <Button size="xs" variant="default" onClick={() => toggle.mutate(w)}>
                            {w.isActive ? 'Disable' : 'Enable'}
                          </Button>
                          <ConfirmButton
                            question="Rotate the signing secret? The old one keeps signing alongside the new one for 24 hours."
                            onConfirm={() => rotate.mutate(w.id)}
                          >
                            Rotate secret
                          </ConfirmButton>
                        </>
                      )}
                      {can('webhooks:delete') && (
                        <ConfirmButton
                          danger
                          question={`Delete webhook "${w.name}"?`}
                          onConfirm={() => remove.mutate(w.id)}
                        >
                          Delete
                        </ConfirmButton>
                      )}
                    </Group>
                  </Table.Td>
                </Table.Tr>
              ))}
            </Table.Tbody>
          </Table>
        </Table.ScrollContainer>
      )}
      {open && <Deliveries webhook={open} />}
      {creating && (
        <CreateWebhook
          onClose={() => setCreating(false)}
          onCreated={(s) => {
            setCreating(false);
            setSecret(s);
            invalidate();
          }}
        />
      )}
      <Modal opened={secret !== null} onClose={() => setSecret(null)} title="Signing secret" size="lg">
        <Stack>
          <Alert color="orange">Copy this signing secret now: it is shown only once.</Alert>
          <Code block data-testid="webhook-secret">
            {secret}
          </Code>
          <Copy value={secret ?? ''} label="Copy secret" />
        </Stack>
      </Modal>
    </>
  );
}

function CreateWebhook({ onClose, onCreated }: { onClose: () => void; onCreated: (secret: string) => void }) {
  const [name, setName] = useState('');
  const [url, setUrl] = useState('');
  const [events, setEvents] = useState<string[]>(['email.delivered', 'email.failed', 'email.bounced']);
  const create = useMutation({
    mutationFn: () => unwrap(api.POST('/api/webhooks', { body: { name, url, events: events as Events } })),
    onSuccess: (w) => onCreated(w.secret),
  });
  const errors = fieldErrors(create.error);
  return (
    <Modal opened onClose={onClose} title="New webhook">
      <MutationForm mutation={create} submitLabel="Create webhook">
        <TextInput
          label="Name"
          required
          value={name}
          onChange={(e) => setName(e.currentTarget.value)}
          error={errors.name}
        />
        <TextInput
          label="URL"
          required
          placeholder="https://example.com/hooks/postwright"
          value={url}
          onChange={(e) => setUrl(e.currentTarget.value)}
          error={errors.url}
        />
        <Checkbox.Group label="Events" value={events} onChange={setEvents} error={errors.events}>
          <Stack gap={4} mt={4}>
            {EVENTS.map((e) => (
              <Checkbox key={e} value={e} label={e} />
            ))}
          </Stack>
        </Checkbox.Group>
      </MutationForm>
    </Modal>
  );
}

function Deliveries({ webhook }: { webhook: Webhook }) {
  const queryClient = useQueryClient();
  const deliveries = useQuery({
    queryKey: ['deliveries', webhook.id],
    queryFn: () => unwrap(api.GET('/api/webhooks/{id}/deliveries', { params: { path: { id: webhook.id } } })),
  });
  const redeliver = useMutation({
    mutationFn: (deliveryId: string) =>
      unwrap(
        api.POST('/api/webhooks/{id}/deliveries/{deliveryId}/redeliver', {
          params: { path: { id: webhook.id, deliveryId } },
        }),
      ),
    onSuccess: () => {
      notifyOk('Redelivery queued');
      queryClient.invalidateQueries({ queryKey: ['deliveries', webhook.id] });
    },
    onError: notifyError,
  });
  return (
    <Paper withBorder p="md" mt="md">
      <Group justify="space-between">
        <Title order={4}>Deliveries of {webhook.name}</Title>
        <Button size="xs" variant="default" onClick={() => deliveries.refetch()}>
          Refresh
        </Button>
      </Group>
      <ErrorAlert error={deliveries.error} />
      {deliveries.data?.length === 0 && (
        <Text c="dimmed">No delivery yet. Use "Test" to send a test event.</Text>
      )}
      <Stack mt="sm" data-testid="deliveries">
        {(deliveries.data ?? []).map((d) => (
          <Paper withBorder p="sm" key={d.id}>
            <Group justify="space-between">
              <Group>
                <Badge color={d.success ? 'green' : 'red'}>{d.responseStatus ?? 'no response'}</Badge>
                <Text size="sm">{d.event}</Text>
                <Text size="xs" c="dimmed">
                  attempt {d.attemptCount} · {formatDate(d.createdAt)}
                  {d.durationMs !== null && ` · ${d.durationMs} ms`}
                </Text>
              </Group>
              <Button size="xs" variant="light" onClick={() => redeliver.mutate(d.id)}>
                Redeliver
              </Button>
            </Group>
            {d.error && (
              <Text size="xs" c="red">
                {d.error}
              </Text>
            )}
            <Text size="xs" fw={500} mt="xs">
              Request payload
            </Text>
            <Code block>{JSON.stringify(d.payload, null, 2)}</Code>
            {d.responseBody && (
              <>
                <Text size="xs" fw={500} mt="xs">
                  Response body
                </Text>
                <Code block>{d.responseBody}</Code>
              </>
            )}
          </Paper>
        ))}
      </Stack>
    </Paper>
  );
}
