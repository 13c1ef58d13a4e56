import {
  Anchor,
  Badge,
  Button,
  Code,
  Group,
  Pagination,
  Paper,
  Select,
  SimpleGrid,
  Stack,
  Table,
  Text,
  TextInput,
  Timeline,
  Title,
} from '@mantine/core';
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { Link, useNavigate, useParams, useSearchParams } from 'react-router';
import { api, unwrap } from '../api/client';
import type { paths } from '../api/schema';
import { useCan } from '../session';
import { EmptyState, ErrorAlert, formatDate, Loading, notifyError, notifyOk, PageTitle } from '../ui';

export const STATUSES = [
  'queued',
  'sent',
  'delivered',
  'opened',
  'clicked',
  'bounced',
  'failed',
  'spam',
] as const satisfies readonly LogStatus[];
type Status = (typeof STATUSES)[number];
/** The API's email statuses (the log list's `status`): a status it does not know is a type error above. */
type LogStatus =
  paths['/api/logs']['get']['responses'][200]['content']['application/json']['data']['items'][number]['status'];
export const STATUS_COLORS: Record<Status, string> = {
  queued: 'gray',
  sent: 'blue',
  delivered: 'teal',
  opened: 'green',
  clicked: 'lime',
  bounced: 'orange',
  failed: 'red',
  spam: 'grape',
};

export function StatusBadge({ status }: { status: string }) {
  return <Badge color={STATUS_COLORS[status as Status] ?? 'gray'}>{status}</Badge>;
}

/** `YYYY-MM-DD` of a date input to the ISO bound the API takes (start or end of that day, local time). */
function dayBound(day: string, end: boolean): string | undefined {
  if (!day) return undefined;
  const date = new Date(`${day}T${end ? '23:59:59.999' : '00:00:00'}`);
  return Number.isNaN(date.getTime()) ? undefined : date.toISOString();
}

/** Logs: every filter of the spec (status, template, date range, search) kept in the URL. */
export function LogsPage() {
  const [params, setParams] = useSearchParams();
  const navigate = useNavigate();
  const page = Number(params.get('page') ?? '1') || 1;
  const status = (params.get('status') as Status | null) ?? undefined;
  const templateId = params.get('templateId') ?? undefined;
  const search = params.get('search') ?? '';
  const from = params.get('from') ?? '';
  const to = params.get('to') ?? '';
  const query = {
    page,
    pageSize: 20,
    status,
    templateId,
    search: search || undefined,
    from: dayBound(from, false),
    to: dayBound(to, true),
  };
  const logs = useQuery({
    queryKey: ['logs', query],
    queryFn: () => unwrap(api.GET('/api/logs', { params: { query } })),
  });
  const templates = useQuery({
    queryKey: ['templates', 'all'],
    queryFn: () => unwrap(api.GET('/api/templates', { params: { query: { pageSize: 100 } } })),
  });
  const set = (key: string, value: string | null | undefined) => {
    const next = new URLSearchParams(params);
    if (value) next.set(key, value);
    else next.delete(key);
    if (key !== 'page') next.delete('page');
    setParams(next);
  };
  return (
    <>
      <PageTitle>Logs</PageTitle>
      <Group mb="md" align="end" wrap="wrap">
        <Select
          label="Status"
          placeholder="Any"
          data={[...STATUSES]}
          value={status ?? null}
          onChange={(v) => set('status', v)}
          clearable
          w={150}
        />
        <Select
          label="Template"
          placeholder="Any"
          data={(templates.data?.items ?? []).map((t) => ({ value: t.id, label: t.name }))}
          value={templateId ?? null}
          onChange={(v) => set('templateId', v)}
          clearable
          searchable
          w={200}
        />
        <TextInput
          label="From"
          type="date"
          value={from}
          onChange={(e) => set('from', e.currentTarget.value)}
        />
        <TextInput label="To" type="date" value={to} onChange={(e) => set('to', e.currentTarget.value)} />
        <TextInput
          label="Search"
          placeholder="Recipient or subject"
          defaultValue={search}
          onKeyDown={(e) => e.key === 'Enter' && set('search', e.currentTarget.value)}
          onBlur={(e) => e.currentTarget.value !== search && set('search', e.currentTarget.value)}
        />
      </Group>
      <ErrorAlert error={logs.error} />
      {logs.isPending ? (
        <Loading />
      ) : logs.data && logs.data.items.length === 0 ? (
        <EmptyState>
          No email matches. Send one with an API key (POST /api/v1/send) or change the filters.
        </EmptyState>
      ) : (
        logs.data && (
          <>
            <Table.ScrollContainer minWidth={640}>
              <Table striped highlightOnHover>
                <Table.Thead>
                  <Table.Tr>
                    <Table.Th>To</Table.Th>
                    <Table.Th>Subject</Table.Th>
                    <Table.Th>Template</Table.Th>
                    <Table.Th>Status</Table.Th>
                    <Table.Th>Created</Table.Th>
                  </Table.Tr>
                </Table.Thead>
                <Table.Tbody>
                  {logs.data.items.map((log) => (
                    <Table.Tr
                      key={log.id}
                      style={{ cursor: 'pointer' }}
                      onClick={() => navigate(`/logs/${log.id}`)}
                    >
                      <Table.Td>
                        <Anchor component={Link} to={`/logs/${log.id}`}>
                          {log.toAddresses.join(', ')}
                        </Anchor>
                      </Table.Td>
                      <Table.Td>{log.subject}</Table.Td>
                      <Table.Td>{log.templateName}</Table.Td>
                      <Table.Td>
                        <StatusBadge status={log.status} />
                      </Table.Td>
                      <Table.Td>{formatDate(log.createdAt)}</Table.Td>
                    </Table.Tr>
                  ))}
                </Table.Tbody>
              </Table>
            </Table.ScrollContainer>
            <Group justify="space-between" mt="md">
              <Text size="sm" c="dimmed">
                {logs.data.total} emails
              </Text>
              <Pagination
                total={logs.data.totalPages}
                value={page}
                onChange={(p) => set('page', String(p))}
              />
            </Group>
          </>
        )
      )}
    </>
  );
}

/** One email: every field, the status timeline, the rendered content (sandboxed), resend. */
export function LogDetailPage() {
  const { id = '' } = useParams();
  const can = useCan();
  const navigate = useNavigate();
  const queryClient = useQueryClient();
  const path = { params: { path: { id } } };
  const log = useQuery({ queryKey: ['log', id], queryFn: () => unwrap(api.GET('/api/logs/{id}', path)) });
  const events = useQuery({
    queryKey: ['log-events', id],
    queryFn: () => unwrap(api.GET('/api/logs/{id}/events', path)),
  });
  const rendered = useQuery({
    queryKey: ['log-rendered', id],
    queryFn: () => unwrap(api.GET('/api/logs/{id}/rendered', path)),
  });
  const resend = useMutation({
    mutationFn: () => unwrap(api.POST('/api/logs/{id}/resend', path)),
    onSuccess: (result) => {
      notifyOk('Email queued again');
      queryClient.invalidateQueries({ queryKey: ['logs'] });
      navigate(`/logs/${result.id}`);
    },
    onError: notifyError,
  });
  if (log.isPending) return <Loading />;
  if (log.error) return <ErrorAlert error={log.error} />;
  const l = log.data;
  const fields: [string, string][] = [
    ['ID', l.id],
    ['To', l.toAddresses.join(', ')],
    ['Cc', l.cc?.join(', ') ?? '—'],
    ['Bcc', l.bcc?.join(', ') ?? '—'],
    ['From', l.fromAddress ?? '—'],
    ['Subject', l.subject],
    ['Template', l.templateName],
    ['Adapter', l.adapterId ?? '—'],
    ['Provider message ID', l.providerMessageId ?? '—'],
    ['Attempts', String(l.attemptCount)],
    ['PDF attached', l.hasPdfAttachment ? 'yes' : 'no'],
    ['Created', formatDate(l.createdAt)],
    ['Sent', formatDate(l.sentAt)],
    ['Delivered', formatDate(l.deliveredAt)],
    ['Opened', formatDate(l.openedAt)],
    ['Clicked', formatDate(l.clickedAt)],
    ['Scheduled', formatDate(l.scheduledAt)],
  ];
  const canResend =
    can('logs:resend') && (l.status === 'failed' || l.status === 'bounced') && l.templateId !== null;
  return (
    <>
      <PageTitle
        actions={
          canResend && (
            <Button onClick={() => resend.mutate()} loading={resend.isPending}>
              Resend
            </Button>
          )
        }
      >
        <Group>
          {l.subject} <StatusBadge status={l.status} />{' '}
          {l.hasPdfAttachment && <Badge variant="outline">PDF</Badge>}
        </Group>
      </PageTitle>
      {l.errorMessage && <ErrorAlert error={new Error(l.errorMessage)} title="Delivery error" />}
      <SimpleGrid cols={{ base: 1, md: 2 }} mt="md">
        <Paper withBorder p="md">
          <Table>
            <Table.Tbody>
              {fields.map(([k, v]) => (
                <Table.Tr key={k}>
                  <Table.Th w={180}>{k}</Table.Th>
                  <Table.Td style={{ wordBreak: 'break-all' }}>{v}</Table.Td>
                </Table.Tr>
              ))}
            </Table.Tbody>
          </Table>
        </Paper>
        <Paper withBorder p="md">
          <Title order={4} mb="sm">
            Status timeline
          </Title>
          <ErrorAlert error={events.error} />
          <Timeline active={(events.data?.length ?? 1) - 1} data-testid="timeline">
            {(events.data ?? []).map((e) => (
              <Timeline.Item key={`${e.at}-${e.status}-${e.source}`} title={e.status}>
                <Text size="xs" c="dimmed">
                  {formatDate(e.at)} · {e.source}
                </Text>
                {Object.keys(e.detail).length > 0 && (
                  <Text size="xs" style={{ wordBreak: 'break-all' }}>
                    {JSON.stringify(e.detail)}
                  </Text>
                )}
              </Timeline.Item>
            ))}
          </Timeline>
        </Paper>
      </SimpleGrid>
      <SimpleGrid cols={{ base: 1, md: 2 }} mt="md">
        {(
          [
            ['Variables', l.variables],
            ['Metadata', l.metadata],
            ['Tags', l.tags],
            ['Headers', l.headers],
            ['Attachments', l.attachments],
            ['Reply-To', l.replyTo],
          ] as [string, unknown][]
        )
          .filter(
            ([, value]) =>
              value !== null && value !== undefined && !(Array.isArray(value) && value.length === 0),
          )
          .map(([label, value]) => (
            <Paper withBorder p="md" key={label}>
              <Title order={5} mb="xs">
                {label}
              </Title>
              <Code block>{JSON.stringify(value, null, 2)}</Code>
            </Paper>
          ))}
      </SimpleGrid>
      <Stack mt="md">
        <Title order={4}>Content</Title>
        <ErrorAlert error={rendered.error} />
        {rendered.data && (
          <iframe
            title="Rendered email"
            sandbox=""
            srcDoc={rendered.data.html}
            style={{ width: '100%', height: 600, border: '1px solid #ddd', background: 'white' }}
          />
        )}
      </Stack>
    </>
  );
}
