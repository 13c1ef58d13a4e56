import { BarChart } from '@mantine/charts';
import { Anchor, Group, Paper, SegmentedControl, SimpleGrid, Table, Text, Title } from '@mantine/core';
import { useQuery } from '@tanstack/react-query';
import { useState } from 'react';
import { Link } from 'react-router';
import { api, unwrap } from '../api/client';
import { useCan } from '../session';
import { ErrorAlert, formatDate, Loading, PageTitle } from '../ui';
import { STATUS_COLORS, STATUSES, StatusBadge } from './Logs';
import { dayStart, dayWindows } from './overview-days';

const PERIODS = { '1': 'Today', '7': '7 days', '30': '30 days' } as const;
type Period = keyof typeof PERIODS;

function rate(part: number, whole: number): string {
  return whole === 0 ? '—' : `${((100 * part) / whole).toFixed(1)} %`;
}

/** Overview: /api/logs/stats counters for a period, sends per day by status, rates, latest failures. */
export function OverviewPage() {
  const can = useCan();
  const [period, setPeriod] = useState<Period>('7');
  const days = Number(period);
  const from = dayStart(days - 1).toISOString();
  const stats = useQuery({
    queryKey: ['stats', period],
    enabled: can('logs:view'),
    queryFn: () => unwrap(api.GET('/api/logs/stats', { params: { query: { from } } })),
  });
  // One stats call per day: the API has no per-day series.
  const perDay = useQuery({
    queryKey: ['stats-per-day', period],
    enabled: can('logs:view'),
    queryFn: () =>
      Promise.all(
        dayWindows(days).map(async ({ start, end }) => {
          const s = await unwrap(
            api.GET('/api/logs/stats', {
              params: { query: { from: start.toISOString(), to: end.toISOString() } },
            }),
          );
          return { day: start.toLocaleDateString(undefined, { month: 'short', day: 'numeric' }), ...s };
        }),
      ),
  });
  const failures = useQuery({
    queryKey: ['logs', 'latest-failures'],
    enabled: can('logs:view'),
    queryFn: () => unwrap(api.GET('/api/logs', { params: { query: { status: 'failed', pageSize: 5 } } })),
  });
  if (!can('logs:view')) {
    return (
      <>
        <PageTitle>Overview</PageTitle>
        <Text>Your role cannot view email logs, so there are no statistics to show.</Text>
      </>
    );
  }
  const s = stats.data;
  // Each email counts once, under its current status: an opened or clicked email was delivered.
  const delivered = s ? s.delivered + s.opened + s.clicked : 0;
  const sent = s ? s.sent + delivered + s.bounced + s.spam : 0;
  return (
    <>
      <PageTitle
        actions={
          <SegmentedControl
            data={Object.entries(PERIODS).map(([value, label]) => ({ value, label }))}
            value={period}
            onChange={(v) => setPeriod(v as Period)}
          />
        }
      >
        Overview
      </PageTitle>
      <ErrorAlert error={stats.error ?? perDay.error} />
      {stats.isPending ? (
        <Loading />
      ) : (
        s && (
          <>
            <SimpleGrid cols={{ base: 2, sm: 3, md: 5 }} data-testid="stats">
              {(['total', ...STATUSES] as const).map((key) => (
                <Paper withBorder p="sm" key={key}>
                  <Text size="xs" c="dimmed" tt="uppercase">
                    {key}
                  </Text>
                  <Text fw={700} size="xl" data-testid={`stat-${key}`}>
                    {s[key]}
                  </Text>
                </Paper>
              ))}
            </SimpleGrid>
            <SimpleGrid cols={{ base: 2, md: 4 }} mt="md">
              {[
                ['Delivery rate', rate(delivered, sent)],
                ['Open rate', rate(s.opened + s.clicked, delivered)],
                ['Click rate', rate(s.clicked, delivered)],
                ['Bounce rate', rate(s.bounced, sent)],
              ].map(([label, value]) => (
                <Paper withBorder p="sm" key={label}>
                  <Text size="xs" c="dimmed">
                    {label}
                  </Text>
                  <Text fw={700}>{value}</Text>
                </Paper>
              ))}
            </SimpleGrid>
          </>
        )
      )}
      <Paper withBorder p="md" mt="md">
        <Title order={4} mb="sm">
          Sends per day by status
        </Title>
        {perDay.data ? (
          <BarChart
            h={260}
            data={perDay.data}
            dataKey="day"
            type="stacked"
            series={STATUSES.map((status) => ({ name: status, color: `${STATUS_COLORS[status]}.6` }))}
          />
        ) : (
          <Loading />
        )}
      </Paper>
      <Paper withBorder p="md" mt="md">
        <Group justify="space-between" mb="sm">
          <Title order={4}>Latest failures</Title>
          <Anchor component={Link} to="/logs?status=failed">
            All failures
          </Anchor>
        </Group>
        {failures.data?.items.length === 0 ? (
          <Text c="dimmed">No failed email.</Text>
        ) : (
          <Table>
            <Table.Tbody>
              {(failures.data?.items ?? []).map((log) => (
                <Table.Tr key={log.id}>
                  <Table.Td>
                    <Anchor component={Link} to={`/logs/${log.id}`}>
                      {log.toAddresses.join(', ')}
                    </Anchor>
                  </Table.Td>
                  <Table.Td>{log.subject}</Table.Td>
                  <Table.Td>
                    <StatusBadge status={log.status} />
                  </Table.Td>
                  <Table.Td>{formatDate(log.createdAt)}</Table.Td>
                </Table.Tr>
              ))}
            </Table.Tbody>
          </Table>
        )}
      </Paper>
    </>
  );
}
