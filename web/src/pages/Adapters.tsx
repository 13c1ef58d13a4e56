import {
  Badge,
  Button,
  Checkbox,
  Group,
  Modal,
  NumberInput,
  PasswordInput,
  Select,
  Stack,
  Switch,
  Table,
  Text,
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
  Loading,
  MutationForm,
  notifyError,
  notifyOk,
  PageTitle,
} from '../ui';

type AdapterType =
  paths['/api/adapters/types']['get']['responses'][200]['content']['application/json']['data'][number];
type Adapter = paths['/api/adapters']['get']['responses'][200]['content']['application/json']['data'][number];
type Config = Record<string, unknown>;
type TypeId = NonNullable<
  paths['/api/adapters']['post']['requestBody']
>['content']['application/json']['type'];

/** Adapters: list, create/edit forms generated from GET /api/adapters/types, test, default toggle. */
export function AdaptersPage() {
  const can = useCan();
  const queryClient = useQueryClient();
  const adapters = useQuery({ queryKey: ['adapters'], queryFn: () => unwrap(api.GET('/api/adapters')) });
  const types = useQuery({
    queryKey: ['adapter-types'],
    queryFn: () => unwrap(api.GET('/api/adapters/types')),
  });
  const [editing, setEditing] = useState<Adapter | 'new' | null>(null);
  const [testResult, setTestResult] = useState<Record<string, { success: boolean; message: string }>>({});
  const invalidate = () => queryClient.invalidateQueries({ queryKey: ['adapters'] });

  const test = useMutation({
    mutationFn: (id: string) => unwrap(api.POST('/api/adapters/{id}/test', { params: { path: { id } } })),
    onSuccess: (result, id) => setTestResult((r) => ({ ...r, [id]: result })),
    onError: notifyError,
  });
  const makeDefault = useMutation({
    mutationFn: (id: string) =>
      unwrap(api.PUT('/api/adapters/{id}', { params: { path: { id } }, body: { isDefault: true } })),
    onSuccess: invalidate,
    onError: notifyError,
  });
  const remove = useMutation({
    mutationFn: (id: string) => unwrap(api.DELETE('/api/adapters/{id}', { params: { path: { id } } })),
    onSuccess: () => {
      notifyOk('Adapter deleted');
      invalidate();
    },
    onError: notifyError,
  });

  if (adapters.isPending || types.isPending) return <Loading />;
  if (adapters.error || types.error) return <ErrorAlert error={adapters.error ?? types.error} />;
  const typeName = (type: string) => types.data.find((t) => t.type === type)?.name ?? type;
  return (
    <>
      <PageTitle
        actions={can('adapters:create') && <Button onClick={() => setEditing('new')}>New adapter</Button>}
      >
        Adapters
      </PageTitle>
      {adapters.data.length === 0 ? (
        <EmptyState>
          No adapter yet: add your SMTP server or email API so Postwright can deliver emails.
        </EmptyState>
      ) : (
        <Table.ScrollContainer minWidth={700}>
          <Table striped>
            <Table.Thead>
              <Table.Tr>
                <Table.Th>Name</Table.Th>
                <Table.Th>Type</Table.Th>
                <Table.Th>Default sender</Table.Th>
                <Table.Th>Status</Table.Th>
                <Table.Th>Actions</Table.Th>
              </Table.Tr>
            </Table.Thead>
            <Table.Tbody>
              {adapters.data.map((a) => (
                <Table.Tr key={a.id} data-testid={`adapter-${a.name}`}>
                  <Table.Td>
                    {a.name} {a.isDefault && <Badge ml="xs">default</Badge>}
                  </Table.Td>
                  <Table.Td>{typeName(a.type)}</Table.Td>
                  <Table.Td>{a.defaultFrom ?? '—'}</Table.Td>
                  <Table.Td miw={110}>
                    {a.isActive ? <Badge color="green">active</Badge> : <Badge color="gray">inactive</Badge>}
                    {testResult[a.id] && (
                      <Text size="sm" c={testResult[a.id]?.success ? 'green' : 'red'} role="status">
                        {testResult[a.id]?.success ? 'Connection OK: ' : 'Connection failed: '}
                        {testResult[a.id]?.message}
                      </Text>
                    )}
                  </Table.Td>
                  <Table.Td>
                    <Group gap="xs">
                      {can('adapters:update') && (
                        <Button
                          size="xs"
                          variant="light"
                          onClick={() => test.mutate(a.id)}
                          loading={test.isPending && test.variables === a.id}
                        >
                          Test connection
                        </Button>
                      )}
                      {can('adapters:update') && !a.isDefault && (
                        <Button size="xs" variant="default" onClick={() => makeDefault.mutate(a.id)}>
                          Make default
                        </Button>
                      )}
                      {can('adapters:view-config') && can('adapters:update') && (
                        <Button size="xs" variant="default" onClick={() => setEditing(a)}>
                          Edit
                        </Button>
                      )}
                      {can('adapters:delete') && (
                        <ConfirmButton
                          danger
                          question={`Delete adapter "${a.name}"?`}
                          onConfirm={() => remove.mutate(a.id)}
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
        <AdapterForm
          types={types.data}
          adapter={editing === 'new' ? null : editing}
          onClose={() => setEditing(null)}
          onSaved={() => {
            setEditing(null);
            invalidate();
          }}
        />
      )}
    </>
  );
}

function AdapterForm({
  types,
  adapter,
  onClose,
  onSaved,
}: {
  types: AdapterType[];
  adapter: Adapter | null;
  onClose: () => void;
  onSaved: () => void;
}) {
  const detail = useQuery({
    queryKey: ['adapter', adapter?.id],
    enabled: adapter !== null,
    queryFn: () => unwrap(api.GET('/api/adapters/{id}', { params: { path: { id: adapter!.id } } })),
  });
  // SMTP first: any mail server works with it.
  const [type, setType] = useState(
    adapter?.type ?? (types.some((t) => t.type === 'smtp') ? 'smtp' : (types[0]?.type ?? 'smtp')),
  );
  const [name, setName] = useState(adapter?.name ?? '');
  const [defaultFrom, setDefaultFrom] = useState(adapter?.defaultFrom ?? '');
  const [isDefault, setIsDefault] = useState(adapter?.isDefault ?? false);
  const [isActive, setIsActive] = useState(adapter?.isActive ?? true);
  const [config, setConfig] = useState<Config | null>(adapter ? null : {});
  const current = config ?? (detail.data?.config as Config | undefined) ?? null;

  const save = useMutation({
    mutationFn: async () => {
      const body = { name, config: current ?? {} };
      if (adapter) {
        // An emptied field clears the sender (the update schema takes null); undefined kept it.
        return unwrap(
          api.PUT('/api/adapters/{id}', {
            params: { path: { id: adapter.id } },
            body: { ...body, defaultFrom: defaultFrom || null, isActive },
          }),
        );
      }
      return unwrap(
        api.POST('/api/adapters', {
          body: { ...body, defaultFrom: defaultFrom || undefined, type: type as TypeId, isDefault },
        }),
      );
    },
    onSuccess: () => {
      notifyOk(adapter ? 'Adapter saved' : 'Adapter created');
      onSaved();
    },
  });
  const errors = fieldErrors(save.error);
  const descriptor = types.find((t) => t.type === type);
  const setField = (key: string, value: unknown) => setConfig({ ...(current ?? {}), [key]: value });
  return (
    <Modal opened onClose={onClose} title={adapter ? `Edit ${adapter.name}` : 'New adapter'} size="lg">
      {adapter && detail.isPending ? (
        <Loading />
      ) : (
        <MutationForm
          mutation={save}
          submitLabel={adapter ? 'Save' : 'Create adapter'}
          error={detail.error ?? save.error}
        >
          <Select
            label="Type"
            data={types.map((t) => ({ value: t.type, label: t.name }))}
            value={type}
            onChange={(v) => {
              if (v) setType(v);
              setConfig({});
            }}
            disabled={adapter !== null}
            allowDeselect={false}
            description={descriptor?.description}
          />
          <TextInput
            label="Name"
            required
            value={name}
            onChange={(e) => setName(e.currentTarget.value)}
            error={errors.name}
          />
          <TextInput
            label="Default sender"
            placeholder="Acme <hello@example.com>"
            value={defaultFrom}
            onChange={(e) => setDefaultFrom(e.currentTarget.value)}
            error={errors.defaultFrom}
          />
          {descriptor?.configFields.map((f) => {
            const value = current?.[f.name];
            const common = {
              label: f.label,
              required: f.required,
              placeholder: f.placeholder,
              error: errors[`config.${f.name}`],
            };
            if (f.type === 'password')
              return (
                <PasswordInput
                  key={f.name}
                  {...common}
                  autoComplete="new-password"
                  value={(value as string | undefined) ?? ''}
                  onChange={(e) => setField(f.name, e.currentTarget.value || undefined)}
                />
              );
            if (f.type === 'number')
              return (
                <NumberInput
                  key={f.name}
                  {...common}
                  value={(value as number | undefined) ?? ''}
                  onChange={(v) => setField(f.name, typeof v === 'number' ? v : undefined)}
                />
              );
            if (f.type === 'boolean')
              return (
                <Checkbox
                  key={f.name}
                  label={f.label}
                  checked={value === true}
                  onChange={(e) => setField(f.name, e.currentTarget.checked)}
                  error={errors[`config.${f.name}`]}
                />
              );
            if (f.type === 'select')
              return (
                <Select
                  key={f.name}
                  {...common}
                  data={f.options ?? []}
                  value={(value as string | undefined) ?? null}
                  onChange={(v) => setField(f.name, v ?? undefined)}
                  clearable={!f.required}
                />
              );
            return (
              <TextInput
                key={f.name}
                {...common}
                value={(value as string | undefined) ?? ''}
                onChange={(e) => setField(f.name, e.currentTarget.value || undefined)}
              />
            );
          })}
          {adapter ? (
            <Switch
              label="Active"
              checked={isActive}
              onChange={(e) => setIsActive(e.currentTarget.checked)}
            />
          ) : (
            <Switch
              label="Default adapter of the team"
              checked={isDefault}
              onChange={(e) => setIsDefault(e.currentTarget.checked)}
            />
          )}
          {detail.data?.eventsUrl && (
            <Stack gap={4}>
              <Text size="sm" fw={500}>
                Provider events URL (paste it in the provider's webhook settings)
              </Text>
              <Group>
                <Text size="xs" style={{ wordBreak: 'break-all' }} data-testid="events-url">
                  {detail.data.eventsUrl}
                </Text>
                <Copy value={detail.data.eventsUrl} />
              </Group>
            </Stack>
          )}
        </MutationForm>
      )}
    </Modal>
  );
}
