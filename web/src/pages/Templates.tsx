import {
  Alert,
  Anchor,
  Badge,
  Button,
  Group,
  Modal,
  Pagination,
  Paper,
  SegmentedControl,
  SimpleGrid,
  Stack,
  Switch,
  Table,
  Text,
  Textarea,
  TextInput,
  Title,
} from '@mantine/core';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { Link, useSearchParams } from 'react-router';
import { api, unwrap } from '../api/client';
import type { paths } from '../api/schema';
import { useCan } from '../session';
import {
  ConfirmButton,
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

type Template =
  paths['/api/templates']['get']['responses'][200]['content']['application/json']['data']['items'][number];

/** A blank EmailBuilder.js document with one text block (the visual builder edits it later). */
const BLANK_DESIGN = {
  root: { type: 'EmailLayout', data: { childrenIds: ['text'] } },
  text: { type: 'Text', data: { props: { text: 'Hello {{ name }}' } } },
};

/** Templates: list with search, active filter, pagination; create, duplicate, delete, versions, preview. */
export function TemplatesPage() {
  const can = useCan();
  const queryClient = useQueryClient();
  const [params, setParams] = useSearchParams();
  const page = Number(params.get('page') ?? '1') || 1;
  const search = params.get('search') ?? '';
  const active = params.get('isActive');
  const query = {
    page,
    pageSize: 20,
    search: search || undefined,
    isActive: active === null ? undefined : active === 'true',
  };
  const templates = useQuery({
    queryKey: ['templates', query],
    queryFn: () => unwrap(api.GET('/api/templates', { params: { query: query as never } })),
  });
  const [creating, setCreating] = useState(false);
  const [preview, setPreview] = useState<Template | null>(null);
  const [versionsOf, setVersionsOf] = useState<Template | null>(null);
  const invalidate = () => queryClient.invalidateQueries({ queryKey: ['templates'] });
  const set = (key: string, value: string | null) => {
    const next = new URLSearchParams(params);
    if (value) next.set(key, value);
    else next.delete(key);
    if (key !== 'page') next.delete('page');
    setParams(next);
  };
  const duplicate = useMutation({
    mutationFn: (id: string) =>
      unwrap(api.POST('/api/templates/{id}/duplicate', { params: { path: { id } } })),
    onSuccess: () => {
      notifyOk('Template duplicated');
      invalidate();
    },
    onError: notifyError,
  });
  const remove = useMutation({
    mutationFn: (id: string) => unwrap(api.DELETE('/api/templates/{id}', { params: { path: { id } } })),
    onSuccess: () => {
      notifyOk('Template deleted');
      invalidate();
    },
    onError: notifyError,
  });
  return (
    <>
      <PageTitle
        actions={can('templates:create') && <Button onClick={() => setCreating(true)}>New template</Button>}
      >
        Templates
      </PageTitle>
      <Group mb="md" align="end">
        <TextInput
          label="Search"
          placeholder="Name or slug"
          defaultValue={search}
          onKeyDown={(e) => e.key === 'Enter' && set('search', e.currentTarget.value)}
          onBlur={(e) => e.currentTarget.value !== search && set('search', e.currentTarget.value)}
        />
        <SegmentedControl
          value={active ?? 'all'}
          onChange={(v) => set('isActive', v === 'all' ? null : v)}
          data={[
            { value: 'all', label: 'All' },
            { value: 'true', label: 'Active' },
            { value: 'false', label: 'Inactive' },
          ]}
        />
      </Group>
      <ErrorAlert error={templates.error} />
      {templates.isPending ? (
        <Loading />
      ) : templates.data?.items.length === 0 ? (
        <EmptyState>No template here. Create one, then send it with an API key.</EmptyState>
      ) : (
        templates.data && (
          <>
            <SimpleGrid cols={{ base: 1, sm: 2, lg: 3 }}>
              {templates.data.items.map((t) => (
                <Paper withBorder p="sm" key={t.id}>
                  {t.thumbnailUrl && (
                    <img
                      src={t.thumbnailUrl}
                      alt=""
                      style={{ width: '100%', height: 120, objectFit: 'cover', objectPosition: 'top' }}
                    />
                  )}
                  <Group justify="space-between">
                    <Text fw={600}>{t.name}</Text>
                    {!t.isActive && <Badge color="gray">inactive</Badge>}
                  </Group>
                  <Text size="xs" c="dimmed">
                    {t.slug} · updated {formatDate(t.updatedAt)}
                  </Text>
                  <Text size="sm">{t.subject}</Text>
                  <Group gap="xs" mt="xs">
                    <Button size="xs" variant="light" onClick={() => setPreview(t)}>
                      Preview
                    </Button>
                    <Button size="xs" variant="default" onClick={() => setVersionsOf(t)}>
                      Versions
                    </Button>
                    {can('templates:create') && (
                      <Button size="xs" variant="default" onClick={() => duplicate.mutate(t.id)}>
                        Duplicate
                      </Button>
                    )}
                    {can('templates:delete') && (
                      <ConfirmButton
                        danger
                        question={`Delete template "${t.name}"?`}
                        onConfirm={() => remove.mutate(t.id)}
                      >
                        Delete
                      </ConfirmButton>
                    )}
                  </Group>
                </Paper>
              ))}
            </SimpleGrid>
            <Group justify="flex-end" mt="md">
              <Pagination
                total={templates.data.totalPages}
                value={page}
                onChange={(p) => set('page', String(p))}
              />
            </Group>
          </>
        )
      )}
      {creating && (
        <CreateTemplate
          onClose={() => setCreating(false)}
          onCreated={() => {
            setCreating(false);
            invalidate();
          }}
        />
      )}
      {preview && <Preview template={preview} onClose={() => setPreview(null)} />}
      {versionsOf && <Versions template={versionsOf} onClose={() => setVersionsOf(null)} />}
    </>
  );
}

function CreateTemplate({ onClose, onCreated }: { onClose: () => void; onCreated: () => void }) {
  const [name, setName] = useState('');
  const [subject, setSubject] = useState('');
  const [generatePdf, setGeneratePdf] = useState(false);
  const create = useMutation({
    mutationFn: () =>
      unwrap(api.POST('/api/templates', { body: { name, subject, designJson: BLANK_DESIGN, generatePdf } })),
    onSuccess: onCreated,
  });
  const errors = fieldErrors(create.error);
  return (
    <Modal opened onClose={onClose} title="New template">
      <MutationForm mutation={create} submitLabel="Create template">
        <TextInput
          label="Name"
          required
          value={name}
          onChange={(e) => setName(e.currentTarget.value)}
          error={errors.name}
        />
        <TextInput
          label="Subject"
          required
          placeholder="Welcome, {{ first_name }}!"
          value={subject}
          onChange={(e) => setSubject(e.currentTarget.value)}
          error={errors.subject}
        />
        <Switch
          label="Attach a PDF of the email"
          checked={generatePdf}
          onChange={(e) => setGeneratePdf(e.currentTarget.checked)}
        />
      </MutationForm>
    </Modal>
  );
}

/**
 * The variables form's values as the API's `variables`: empty fields left out, a value starting
 * with `[` or `{` parsed as JSON. @throws Error naming the field when its JSON does not parse.
 */
function variablesOf(values: Record<string, string>): Record<string, unknown> {
  const variables: Record<string, unknown> = {};
  for (const [key, raw] of Object.entries(values)) {
    if (raw === '') continue;
    try {
      variables[key] = /^[[{]/.test(raw.trim()) ? JSON.parse(raw) : raw;
    } catch {
      throw new Error(`${key}: not valid JSON`);
    }
  }
  return variables;
}

/**
 * Preview with a variables form generated from `variables` (JSON for nested values), and "Send
 * test email": the same values sent to the signed-in user's own address (POST
 * /api/templates/:id/send-test, logs:resend), with a link to the email's log.
 */
function Preview({ template, onClose }: { template: Template; onClose: () => void }) {
  const can = useCan();
  const [values, setValues] = useState<Record<string, string>>({});
  const [width, setWidth] = useState('600');
  const render = useMutation({
    mutationFn: () =>
      unwrap(
        api.POST('/api/templates/{id}/preview', {
          params: { path: { id: template.id } },
          body: { variables: variablesOf(values) },
        }),
      ),
  });
  const sendTest = useMutation({
    mutationFn: () =>
      unwrap(
        api.POST('/api/templates/{id}/send-test', {
          params: { path: { id: template.id } },
          body: { variables: variablesOf(values) },
        }),
      ),
  });
  return (
    <Modal opened onClose={onClose} title={`Preview: ${template.name}`} size="xl">
      <Stack>
        {template.variables.length === 0 && <Text c="dimmed">This template uses no variables.</Text>}
        {template.variables.map((v) => (
          <Textarea
            key={v}
            label={v}
            autosize
            minRows={1}
            placeholder="Text, or JSON for a list or object"
            value={values[v] ?? ''}
            onChange={(e) => setValues({ ...values, [v]: e.currentTarget.value })}
          />
        ))}
        <Group>
          <Button onClick={() => render.mutate()} loading={render.isPending}>
            Render
          </Button>
          {can('logs:resend') && (
            <Button variant="light" onClick={() => sendTest.mutate()} loading={sendTest.isPending}>
              Send test email
            </Button>
          )}
          <SegmentedControl
            value={width}
            onChange={setWidth}
            data={[
              { value: '600', label: 'Desktop' },
              { value: '375', label: 'Mobile' },
            ]}
          />
        </Group>
        <ErrorAlert error={sendTest.error} title="Test email not sent" />
        {sendTest.data && !sendTest.isPending && (
          <Alert color="green" title="Test email queued" role="status">
            Sent to your own address.{' '}
            <Anchor component={Link} to={`/logs/${sendTest.data.id}`}>
              View its log
            </Anchor>
          </Alert>
        )}
        <ErrorAlert error={render.error} />
        {render.data && (
          <>
            <Text>
              <b>Subject:</b> {render.data.subject}
            </Text>
            <iframe
              title="Preview"
              sandbox=""
              srcDoc={render.data.html}
              style={{
                width: Number(width),
                maxWidth: '100%',
                height: 500,
                border: '1px solid #ddd',
                background: 'white',
              }}
            />
          </>
        )}
      </Stack>
    </Modal>
  );
}

function Versions({ template, onClose }: { template: Template; onClose: () => void }) {
  const queryClient = useQueryClient();
  const path = { params: { path: { id: template.id } } };
  const versions = useQuery({
    queryKey: ['versions', template.id],
    queryFn: () => unwrap(api.GET('/api/templates/{id}/versions', path)),
  });
  const [name, setName] = useState('');
  const snapshot = useMutation({
    mutationFn: () =>
      unwrap(api.POST('/api/templates/{id}/versions', { ...path, body: { name: name || undefined } })),
    onSuccess: () => {
      setName('');
      queryClient.invalidateQueries({ queryKey: ['versions', template.id] });
    },
    onError: notifyError,
  });
  const restore = useMutation({
    mutationFn: (versionId: string) =>
      unwrap(
        api.PUT('/api/templates/{id}/versions/{versionId}/restore', {
          params: { path: { id: template.id, versionId } },
        }),
      ),
    onSuccess: () => {
      notifyOk('Version restored');
      queryClient.invalidateQueries({ queryKey: ['templates'] });
      // Restoring saves the current content as a new version first: the open history must show it.
      queryClient.invalidateQueries({ queryKey: ['versions', template.id] });
    },
    onError: notifyError,
  });
  return (
    <Modal opened onClose={onClose} title={`Versions of ${template.name}`} size="lg">
      <Stack>
        <Group align="end">
          <TextInput label="Snapshot name" value={name} onChange={(e) => setName(e.currentTarget.value)} />
          <Button onClick={() => snapshot.mutate()} loading={snapshot.isPending}>
            Save current as version
          </Button>
        </Group>
        <ErrorAlert error={versions.error} />
        <Title order={5}>History</Title>
        {versions.data?.length === 0 && <Text c="dimmed">No version saved yet.</Text>}
        <Table>
          <Table.Tbody>
            {(versions.data ?? []).map((v) => (
              <Table.Tr key={v.id}>
                <Table.Td>{v.name ?? '—'}</Table.Td>
                <Table.Td>{formatDate(v.createdAt)}</Table.Td>
                <Table.Td>
                  <ConfirmButton question="Restore this version?" onConfirm={() => restore.mutate(v.id)}>
                    Restore
                  </ConfirmButton>
                </Table.Td>
              </Table.Tr>
            ))}
          </Table.Tbody>
        </Table>
      </Stack>
    </Modal>
  );
}
