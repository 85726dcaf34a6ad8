// The ProxyPool and MediaPlatform CustomResourceDefinitions, cluster-scoped
// like Kueue's ClusterQueue: admins apply them, the operator fills in their
// status. Rendered to crds/proxypool.yaml and crds/mediaplatform.yaml (and
// the chart's and deploy/'s copies) by lib/src/mediajob/generate-crds.ts.
// Descriptions are the documentation `kubectl explain mediaplatform.spec`
// shows. Field names, types and defaults are those of types.ts beside this.
import { crd, type CustomResourceDefinition, type SchemaNode, type ValidationRule } from '../mediajob/crd-source.js';
import {
  BREAKER_STATES, DEFENCE_KINDS, MEDIAPLATFORM_PLURAL, PLATFORM_YTDLP_OPTIONS, PROXY_OPTION_REFUSED, PROXY_SCHEMES, PROXY_STATES, PROXYPOOL_PLURAL,
} from './types.js';

type Extra = Omit<SchemaNode, 'description' | 'type'>;
const str = (description: string, extra: Extra = {}): SchemaNode => ({ description, type: 'string', ...extra });
const int = (description: string, extra: Extra = {}): SchemaNode => ({ description, type: 'integer', format: 'int32', ...extra });
const bool = (description: string, extra: Extra = {}): SchemaNode => ({ description, type: 'boolean', ...extra });
const list = (description: string, items: SchemaNode, extra: Extra = {}): SchemaNode => ({ description, type: 'array', items, ...extra });
const obj = (description: string, properties: Record<string, SchemaNode>, required: string[] = [], extra: Extra = {}): SchemaNode =>
  ({ description, type: 'object', ...extra, properties, ...(required.length && { required }) });

const DNS_LABEL = String.raw`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`;
const DNS_SUBDOMAIN = String.raw`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`;
// A scheme we chain to, a host, an optional port, nothing else. Userinfo is refused by a CEL rule
// (NO_USERINFO), not here: a pattern's refusal quotes the value back, a rule's does not.
const PROXY_URL = String.raw`^(` + PROXY_SCHEMES.join('|') + String.raw`)://[^/?#\s]+/?$`;
const NO_USERINFO: ValidationRule = {
  rule: "!self.contains('@')", message: 'a proxy url must not hold credentials: give the URL with them through urlSecretRef',
};
// A host as a URL writes it, optionally with a port; a leading "*." matches any subdomain.
const HOST_ENTRY = String.raw`^(\*\.)?[A-Za-z0-9]([-A-Za-z0-9.]*[A-Za-z0-9])?(:[0-9]{1,5})?$`;
const CIDR = String.raw`^[0-9A-Fa-f:.]+/[0-9]{1,3}$`;
const CONDITION_TYPE = String.raw`^[A-Za-z0-9][-A-Za-z0-9_.]*$`;

function conditions(types: string): SchemaNode {
  return list(
    `The latest observations of the object's state, one per type (${types}).`,
    obj('One condition, in the standard Kubernetes shape (metav1.Condition).', {
      type: str(`Condition type: ${types}.`, { maxLength: 316, pattern: CONDITION_TYPE }),
      status: str('True, False or Unknown.', { enum: ['True', 'False', 'Unknown'] }),
      reason: str('CamelCase reason for the last transition.', { minLength: 1, maxLength: 1024 }),
      message: str('Human-readable details; may be empty.', { maxLength: 32768 }),
      lastTransitionTime: str('When status last changed (RFC 3339).', { format: 'date-time' }),
      observedGeneration: { ...int('The metadata.generation the condition was set for.', { minimum: 0 }), format: 'int64' },
    }, ['type', 'status', 'reason', 'message', 'lastTransitionTime']),
    { 'x-kubernetes-list-type': 'map', 'x-kubernetes-list-map-keys': ['type'] },
  );
}

const observedGeneration = (): SchemaNode => ({ ...int('The metadata.generation the operator last acted on.', { minimum: 0 }), format: 'int64' });

const secretKeyRef = (what: string): SchemaNode => obj(what, {
  namespace: str('Namespace of the Secret.', { pattern: DNS_LABEL, maxLength: 63 }),
  name: str('Name of the Secret.', { pattern: DNS_SUBDOMAIN, maxLength: 253 }),
  key: str('Key of the Secret whose value is used.', { minLength: 1, maxLength: 253 }),
}, ['namespace', 'name', 'key']);

const ONE_URL: ValidationRule = { rule: 'has(self.url) != has(self.urlSecretRef)', message: 'exactly one of url and urlSecretRef must be set' };

function proxyPoolSpec(): SchemaNode {
  return obj('The pool\'s proxies and how they are used.', {
    proxies: list(
      'The proxies, each one exit (or a provider\'s gateway that picks exits per session). Each attempt of a job goes through '
      + 'one of them, chosen among the Ready ones with the fewest recent starts.',
      obj('One proxy.', {
        id: str('The proxy\'s name: a DNS label, unique in the pool; what status, metrics and Events call it (never its URL).', { pattern: DNS_LABEL, maxLength: 63 }),
        url: str(
          `The proxy's URL without credentials: ${PROXY_SCHEMES.join(', ')}, a host and a port (e.g. http://proxy-1.example:3128). `
          + 'A proxy that needs credentials is given by urlSecretRef instead: a URL here never holds a user name or password.',
          { pattern: PROXY_URL, maxLength: 2048, 'x-kubernetes-validations': [NO_USERINFO] },
        ),
        urlSecretRef: secretKeyRef('A Secret key holding the proxy\'s URL, credentials included (e.g. http://user:pass@proxy-2.example:3128). Read by name by the operator and written only into the job\'s own credentials Secret.'),
      }, ['id'], { 'x-kubernetes-validations': [ONE_URL] }),
      { minItems: 1, maxItems: 1000, 'x-kubernetes-list-type': 'map', 'x-kubernetes-list-map-keys': ['id'] },
    ),
    session: obj('Providers that pin an exit per user name: each attempt gets its own session.', {
      usernameTemplate: str('The proxy user name, with {session} replaced by the attempt\'s session id (<12 hex of the job id\'s sha256>-<attempt>).', { minLength: 1, maxLength: 256 }),
    }, ['usernameTemplate']),
    coolDownSeconds: int('How long a proxy that drew a defence (bot check, sign-in, captcha, ban) rests before it is used again; doubles with each further defence in a row, up to 16 times. Default 300.', { minimum: 0, default: 300 }),
  }, ['proxies']);
}

function proxyPoolStatus(): SchemaNode {
  return obj('The pool\'s health, written by the operator.', {
    proxies: list('Each proxy\'s state and counters.', obj('One proxy.', {
      id: str('The proxy\'s id.'),
      state: str('Ready: used for new attempts. CoolingDown: drew a defence, rests until coolingUntil.', { enum: [...PROXY_STATES] }),
      successes: int('Attempts through it that completed.', { minimum: 0 }),
      defences: int('Attempts through it that drew a defence.', { minimum: 0 }),
      consecutiveDefences: int('Defences since its last success: its cool-down doubles with each.', { minimum: 0 }),
      lastDefence: str('When it last drew a defence (RFC 3339).', { format: 'date-time' }),
      lastDefenceKind: str('What that defence was.', { enum: [...DEFENCE_KINDS] }),
      coolingUntil: str('Until when it rests (RFC 3339).', { format: 'date-time' }),
    }, ['id', 'state', 'successes', 'defences']), { 'x-kubernetes-list-type': 'map', 'x-kubernetes-list-map-keys': ['id'] }),
    ready: int('Proxies Ready now.', { minimum: 0 }),
    total: int('Proxies in the pool.', { minimum: 0 }),
    observedGeneration: observedGeneration(),
    conditions: conditions('Ready'),
  });
}

/** The allow-list as one RE2 alternation, for CEL's matches(). */
const ALLOWED_OPTION = `^--(${PLATFORM_YTDLP_OPTIONS.join('|')})(=.*)?$`;

function mediaPlatformSpec(): SchemaNode {
  return obj('Which jobs belong to the platform and how they reach it.', {
    match: obj('Which jobs belong to the platform.', {
      hosts: list(
        'Hosts of job URLs, as the URL writes them ("www.video.example", or "video.example:8443" for another port), '
        + 'case-insensitive, exact; "*.video.example" matches every subdomain of video.example (not video.example itself). '
        + 'Where two platforms match, an exact host wins over a wildcard, a longer wildcard over a shorter, then the name.',
        str('One host.', { pattern: HOST_ENTRY, maxLength: 260 }), { minItems: 1, 'x-kubernetes-list-type': 'set' },
      ),
      extractors: list(
        'yt-dlp extractor names (e.g. youtube): where the extractor is known (the gateway\'s metadata, is-short and playlist '
        + 'lookups), a URL whose extractor is listed belongs to the platform too.',
        str('One extractor name.', { maxLength: 128 }), { 'x-kubernetes-list-type': 'set' },
      ),
    }, ['hosts']),
    maxRunning: int('Runner Jobs against the platform at once, cluster-wide; the others wait with reason platform_limit. Absent: no cap of its own.', { minimum: 1 }),
    startsPerMinute: int('Job starts against the platform per minute (any 60 seconds); absent: no rate of its own.', { minimum: 1 }),
    startsPerMinutePerProxy: int('Job starts per minute through one proxy of the pool.', { minimum: 1 }),
    proxyPool: str('The ProxyPool whose proxies the platform\'s jobs go through, one proxy session per attempt. Absent: straight out.', { pattern: DNS_SUBDOMAIN, maxLength: 253 }),
    cookies: obj('Cookie files used in rotation.', {
      secretRef: obj(
        'A Secret whose every key is one Netscape cookie file (the key is its id in status and metrics). Read by name by the '
        + 'operator; the chosen file goes only into the job\'s own credentials Secret. Changing the Secret clears the unhealthy marks.',
        {
          namespace: str('Namespace of the Secret.', { pattern: DNS_LABEL, maxLength: 63 }),
          name: str('Name of the Secret.', { pattern: DNS_SUBDOMAIN, maxLength: 253 }),
        }, ['namespace', 'name'],
      ),
    }, ['secretRef']),
    ytdlpArgs: list(
      `yt-dlp options for the platform's jobs, after the deployment's YTDLP_ARGS. Allowed options (long form): `
      + `${PLATFORM_YTDLP_OPTIONS.map((o) => `--${o}`).join(', ')}; values do not start with "-".`,
      str('One argument.', { maxLength: 4096 }),
      {
        maxItems: 64,
        'x-kubernetes-validations': [
          { rule: "!self.exists(a, a == '--proxy' || a.startsWith('--proxy='))", message: PROXY_OPTION_REFUSED },
          { rule: `self.all(a, !a.startsWith('-') || a.matches('${ALLOWED_OPTION}'))`, message: `only these yt-dlp options are allowed: ${PLATFORM_YTDLP_OPTIONS.map((o) => `--${o}`).join(', ')}` },
        ],
      },
    ),
    sourceAddress: obj('For clusters that route a prefix to their nodes: each attempt takes a source address from it (yt-dlp --source-address).', {
      cidr: str('The prefix, e.g. 2001:db8:1234::/64.', { pattern: CIDR, maxLength: 64 }),
    }, ['cidr']),
    breaker: obj('The circuit breaker: this many defences within the window open it; new jobs then wait (platform_paused) until, after the cool-down, one probe job half-opens it, whose success closes it.', {
      defences: int('Defences that open the breaker. Default 5.', { minimum: 1, default: 5 }),
      windowSeconds: int('The window they are counted in. Default 120.', { minimum: 1, default: 120 }),
      coolDownSeconds: int('How long it stays open before a probe job is let through. Default 600.', { minimum: 1, default: 600 }),
    }, [], { default: {} }),
    disabled: bool('Refuse new jobs for the platform (the API answers 422 "Downloads from this platform are disabled"; a MediaJob applied with kubectl fails with reason platform_disabled). Running jobs go on.', { default: false }),
  }, ['match']);
}

function mediaPlatformStatus(): SchemaNode {
  return obj('The platform\'s admission and health, written by the operator.', {
    breaker: str('Closed: jobs are admitted. Open: new jobs wait (platform_paused). HalfOpen: one probe job runs; its success closes it, a defence opens it again.', { enum: [...BREAKER_STATES] }),
    openedAt: str('When the breaker last opened (RFC 3339).', { format: 'date-time' }),
    recentDefences: list('Times of the defences inside the breaker\'s window, oldest first.', str('One defence\'s time (RFC 3339).', { format: 'date-time' }), { maxItems: 1000 }),
    probe: str('The MediaJob (namespace/name) admitted as the half-open breaker\'s probe.'),
    running: int('Runner Jobs against the platform now.', { minimum: 0 }),
    waiting: int('Jobs of the platform waiting to be admitted.', { minimum: 0 }),
    cookies: list('Each cookie file\'s health.', obj('One cookie file (never its content).', {
      id: str('The Secret key the file is under.'),
      healthy: bool('False once it drew a sign-in or bot answer: skipped while another is healthy.'),
      lastFailure: str('When it last drew one (RFC 3339).', { format: 'date-time' }),
    }, ['id', 'healthy']), { 'x-kubernetes-list-type': 'map', 'x-kubernetes-list-map-keys': ['id'] }),
    cookiesVersion: str('The cookie Secret\'s resourceVersion the health marks are for.'),
    observedGeneration: observedGeneration(),
    conditions: conditions('Ready'),
  });
}

export function proxyPoolCrd(): CustomResourceDefinition {
  return crd('ProxyPool', PROXYPOOL_PLURAL, 'pp', [
    { name: 'Ready', type: 'integer', jsonPath: '.status.ready', description: 'Proxies Ready now.' },
    { name: 'Total', type: 'integer', jsonPath: '.status.total', description: 'Proxies in the pool.' },
    { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp', description: 'Time since the pool was created.' },
  ], 'A pool of upstream proxies (mediajobs.io): each attempt of a job of a MediaPlatform naming it goes through one of its proxies, '
    + 'with a session of its own; a proxy that draws a defence cools down. Cluster-scoped, applied by admins.', proxyPoolSpec(), proxyPoolStatus(), [], 'Cluster');
}

export function mediaPlatformCrd(): CustomResourceDefinition {
  return crd('MediaPlatform', MEDIAPLATFORM_PLURAL, 'mp', [
    { name: 'Breaker', type: 'string', jsonPath: '.status.breaker', description: 'The circuit breaker: Closed, Open or HalfOpen.' },
    { name: 'Running', type: 'integer', jsonPath: '.status.running', description: 'Runner Jobs against the platform now.' },
    { name: 'Disabled', type: 'boolean', jsonPath: '.spec.disabled', description: 'New jobs refused.' },
    { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp', description: 'Time since the platform was created.' },
  ], 'A platform media is downloaded from (mediajobs.io): which job URLs belong to it, how many of its jobs run and start, through '
    + 'which ProxyPool and cookie files, with which yt-dlp options, and its circuit breaker. Cluster-scoped, applied by admins '
    + '(docs/adr/0027-platforms-and-proxy-pools.md).', mediaPlatformSpec(), mediaPlatformStatus(), [], 'Cluster');
}
