import {
  Alert,
  Badge,
  Button,
  Code,
  Group,
  Modal,
  MultiSelect,
  NumberInput,
  Stack,
  Switch,
  Table,
  TextInput,
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

type ApiKey = paths['/api/api-keys']['get']['responses'][200]['content']['application/json']['data'][number];
type Scope = NonNullable<
  paths['/api/api-keys']['post']['requestBody']
>['content']['application/json']['scopes'];
/** The API's scopes; `satisfies` makes a scope the API does not know a type error. */
const SCOPES = ['send', 'templates:read', 'templates:write', 'templates:delete', 'logs:read'] satisfies Scope;

/** API keys: list, create/regenerate (secret shown once), edit, delete. */
export function ApiKeysPage() {
  const can = useCan();
  const queryClient = useQueryClient();
  const keys = useQuery({ queryKey: ['api-keys'], queryFn: () => unwrap(api.GET('/api/api-keys')) });
  const [editing, setEditing] = useState<ApiKey | 'new' | null>(null);
  const [secret, setSecret] = useState<{ name: string; key: string } | null>(null);
  const invalidate = () => queryClient.invalidateQueries({ queryKey: ['api-keys'] });
  const regenerate = useMutation({
    mutationFn: (id: string) =>
      unwrap(api.POST('/api/api-keys/{id}/regenerate', { params: { path: { id } } })),
    onSuccess: (key) => {
      setSecret({ name: key.name, key: key.key });
      invalidate();
    },
    onError: notifyError,
  });
  const remove = useMutation({
    mutationFn: (id: string) => unwrap(api.DELETE('/api/api-keys/{id}', { params: { path: { id } } })),
    onSuccess: () => {
      notifyOk('API key deleted');
      invalidate();
    },
    onError: notifyError,
  });
  if (keys.isPending) return <Loading />;
  if (keys.error) return <ErrorAlert error={keys.error} />;
  return (
    <>
      <PageTitle
        actions={can('api-keys:create') && <Button onClick={() => setEditing('new')}>New API key</Button>}
      >
        API keys
      </PageTitle>
      {keys.data.length === 0 ? (
        <EmptyState>No API key yet: create one for your application to send emails with.</EmptyState>
      ) : (
        <Table.ScrollContainer minWidth={800}>
          <Table striped>
            <Table.Thead>
              <Table.Tr>
                <Table.Th>Name</Table.Th>
                <Table.Th>Prefix</Table.Th>
                <Table.Th>Scopes</Table.Th>
                <Table.Th>Rate limit</Table.Th>
                <Table.Th>Expires</Table.Th>
                <Table.Th>Last used</Table.Th>
                <Table.Th>Actions</Table.Th>
              </Table.Tr>
            </Table.Thead>
            <Table.Tbody>
              {keys.data.map((k) => (
                <Table.Tr key={k.id}>
                  <Table.Td>
                    {k.name} {!k.isActive && <Badge color="gray">inactive</Badge>}
                  </Table.Td>
                  <Table.Td>
                    <Code>{k.keyPrefix}…</Code>
                  </Table.Td>
                  <Table.Td>{k.scopes.join(', ')}</Table.Td>
                  <Table.Td>{k.rateLimit}/min</Table.Td>
                  <Table.Td>{formatDate(k.expiresAt)}</Table.Td>
                  <Table.Td>{formatDate(k.lastUsedAt)}</Table.Td>
                  <Table.Td>
                    <Group gap="xs">
                      {can('api-keys:create') && (
                        <Button size="xs" variant="default" onClick={() => setEditing(k)}>
                          Edit
                        </Button>
                      )}
                      {can('api-keys:create') && (
                        <ConfirmButton
                          question={`Regenerate "${k.name}"? The current secret stops working at once.`}
                          onConfirm={() => regenerate.mutate(k.id)}
                        >
                          Regenerate
                        </ConfirmButton>
                      )}
                      {can('api-keys:delete') && (
                        <ConfirmButton
                          danger
                          question={`Delete API key "${k.name}"? This cannot be undone.`}
                          onConfirm={() => remove.mutate(k.id)}
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
      {editing && (
        <ApiKeyForm
          apiKey={editing === 'new' ? null : editing}
          onClose={() => setEditing(null)}
          onSaved={(created) => {
            setEditing(null);
            if (created) setSecret(created);
            invalidate();
          }}
        />
      )}
      <Modal opened={secret !== null} onClose={() => setSecret(null)} title="Your new API key" size="lg">
        {secret && (
          <Stack>
            <Alert color="orange">
              Copy this secret now: it is shown only once and cannot be retrieved later.
            </Alert>
            <Code block data-testid="api-key-secret">
              {secret.key}
            </Code>
            <Group>
              <Copy value={secret.key} label="Copy secret" />
              <Button variant="default" onClick={() => setSecret(null)}>
                Done
              </Button>
            </Group>
          </Stack>
        )}
      </Modal>
    </>
  );
}

function ApiKeyForm({
  apiKey,
  onClose,
  onSaved,
}: {
  apiKey: ApiKey | null;
  onClose: () => void;
  onSaved: (created: { name: string; key: string } | null) => void;
}) {
  const [name, setName] = useState(apiKey?.name ?? '');
  const [scopes, setScopes] = useState<string[]>(apiKey?.scopes ?? ['send']);
  const [rateLimit, setRateLimit] = useState<number | ''>(apiKey?.rateLimit ?? '');
  const [expiresAt, setExpiresAt] = useState('');
  const [isActive, setIsActive] = useState(apiKey?.isActive ?? true);
  const save = useMutation({
    mutationFn: async () => {
      const common = { name, scopes: scopes as Scope, rateLimit: rateLimit === '' ? undefined : rateLimit };
      if (apiKey) {
        await unwrap(
          api.PUT('/api/api-keys/{id}', {
            params: { path: { id: apiKey.id } },
            body: { ...common, isActive },
          }),
        );
        return null;
      }
      const created = await unwrap(
        api.POST('/api/api-keys', {
          body: { ...common, expiresAt: expiresAt ? new Date(expiresAt).toISOString() : undefined },
        }),
      );
      return { name: created.name, key: created.key };
    },
    onSuccess: onSaved,
  });
  const errors = fieldErrors(save.error);
  return (
    <Modal opened onClose={onClose} title={apiKey ? `Edit ${apiKey.name}` : 'New API key'}>
      <MutationForm mutation={save} submitLabel={apiKey ? 'Save' : 'Create key'}>
        <TextInput
          label="Name"
          required
          value={name}
          onChange={(e) => setName(e.currentTarget.value)}
          error={errors.name}
        />
        <MultiSelect label="Scopes" data={SCOPES} value={scopes} onChange={setScopes} error={errors.scopes} />
        <NumberInput
          label="Rate limit (requests per minute)"
          placeholder="server default"
          min={1}
          value={rateLimit}
          onChange={(v) => setRateLimit(typeof v === 'number' ? v : '')}
          error={errors.rateLimit}
        />
        {apiKey ? (
          <Switch label="Active" checked={isActive} onChange={(e) => setIsActive(e.currentTarget.checked)} />
        ) : (
          <TextInput
            label="Expires at (optional)"
            type="datetime-local"
            value={expiresAt}
            onChange={(e) => setExpiresAt(e.currentTarget.value)}
            error={errors.expiresAt}
          />
        )}
      </MutationForm>
    </Modal>
  );
}
