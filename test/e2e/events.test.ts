// Kubernetes Events through the whole system (issue 17, item 2), read the
// way a person reads them: `kubectl get events` and `kubectl describe
// mediajob` against the local cluster, for a job that completes, one that
// fails (a URL nothing answers), one whose media is not there (404: status
// Warning) and one cancelled through the API.
import { expect } from 'chai';
import { eventually } from '../../local-cluster/test/support.js';
import { startMediaServer, unreachableUrl, type MediaServer } from '../support/media.js';
import { startService, type Service } from './support.js';

interface KubeEvent {
  type: string;
  reason: string;
  message: string;
  count: number;
  involvedObject: { kind: string; name: string; uid: string };
  source: { component: string };
  reportingComponent: string;
}

describe('end to end: Kubernetes Events on MediaJobs', function () {
  this.timeout(180_000);
  let svc: Service;
  let media: MediaServer;

  before(async () => {
    media = await startMediaServer();
    svc = await startService();
  });

  after(async () => {
    await svc?.stop();
    await media?.stop();
  });

  const submit = async (body: Record<string, unknown>) => {
    const created = await svc.api('POST', '/jobs', body);
    expect(created.status).to.equal(201);
    return created.body.job_id as string;
  };
  const events = async (name: string): Promise<KubeEvent[]> => {
    const out = await svc.cluster.kubectl(['get', 'events', '--field-selector', `involvedObject.name=${name}`, '-o', 'json']);
    return (JSON.parse(out.stdout) as { items: KubeEvent[] }).items;
  };
  /** The events of a MediaJob once `last` is among them (they are written just after the status). */
  const eventsUntil = (name: string, last: string) => eventually(async () => {
    const e = await events(name);
    return e.some((x) => x.reason === last) ? e : undefined;
  }, 90_000, 250);
  const described = async (name: string) => {
    const out = (await svc.cluster.kubectl(['describe', 'mediajob', name])).stdout;
    return out.slice(out.indexOf('Events:'));
  };

  it('a completed job: Admitted, RunnerJobCreated, Completed, in kubectl get events and describe', async () => {
    const id = await submit({ url: media.mp4Url });
    const list = await eventsUntil(id, 'Completed');
    const uid = (await svc.cluster.kubectl(['get', 'mediajob', id, '-o', 'jsonpath={.metadata.uid}'])).stdout.trim();
    expect(list.map((e) => [e.type, e.reason])).to.deep.equal([
      ['Normal', 'Admitted'], ['Normal', 'RunnerJobCreated'], ['Normal', 'Completed'],
    ]);
    for (const e of list) {
      expect(e.involvedObject).to.include({ kind: 'MediaJob', name: id, uid });
      expect(e.source.component).to.equal('mediajobs.io/operator');
      expect(e.count).to.equal(1);
    }
    expect(list[2]!.message).to.match(/^The media was delivered: \S+\.mp4$/);
    const text = await described(id);
    expect(text).to.match(/Normal\s+Admitted\s+.*mediajobs\.io\/operator\s+A runner slot is free/);
    expect(text).to.match(/Normal\s+RunnerJobCreated\s+.*Created Job /);
    expect(text).to.match(/Normal\s+Completed\s+.*The media was delivered/);
  });

  it('a failed job: a Warning Failed event naming its error category', async () => {
    const id = await submit({ url: await unreachableUrl() });
    const list = await eventsUntil(id, 'Failed');
    const job = (await svc.api('GET', `/jobs/${id}`)).body;
    expect(job.status).to.equal('Failed');
    const failed = list.find((e) => e.reason === 'Failed')!;
    expect(failed.type).to.equal('Warning');
    expect(failed.message).to.equal(`Failed (${String(job.reason ?? 'error')}): ${String(job.error)}`);
    expect(list.map((e) => e.reason)).to.include.members(['Admitted', 'RunnerJobCreated']);
    expect(list.map((e) => e.reason)).to.not.include('StorageUnreachable');
    expect(await described(id)).to.match(/Warning\s+Failed\s+.*Failed \(/);
    const table = (await svc.cluster.kubectl(['get', 'events', '--field-selector', `involvedObject.name=${id},type=Warning`])).stdout;
    expect(table).to.match(new RegExp(`Warning\\s+Failed\\s+mediajob/${id}\\s+Failed \\(`));
  });

  it('a job whose media is not there (404): a Warning MediaUnavailable event', async () => {
    const id = await submit({ url: media.notFoundUrl });
    const list = await eventsUntil(id, 'MediaUnavailable');
    const job = (await svc.api('GET', `/jobs/${id}`)).body;
    expect(job.status).to.equal('Warning');
    expect(list.find((e) => e.reason === 'MediaUnavailable')).to.include({ type: 'Warning', message: job.error });
    expect(await described(id)).to.match(/Warning\s+MediaUnavailable\s+/);
  });

  it('a job cancelled through the API: a Cancelled event', async () => {
    const id = await submit({ url: media.slowUrl(20) });
    await eventually(async () => (await events(id)).some((e) => e.reason === 'RunnerJobCreated'), 30_000, 200);
    expect((await svc.api('POST', `/jobs/${id}/cancel`)).status).to.equal(200);
    const list = await eventsUntil(id, 'Cancelled');
    expect(list.find((e) => e.reason === 'Cancelled')).to.include({ type: 'Normal', message: 'The job was cancelled' });
    expect(await described(id)).to.match(/Normal\s+Cancelled\s+.*The job was cancelled/);
  });
});
