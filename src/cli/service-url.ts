/**
 * Where `pixiu connect` (connect.ts) reaches the service: its HTTP URL from `--url` (http
 * or https, or ws or wss for the same service) or from `--host` and `--port`, and the
 * path of a route under that URL's path, a reverse proxy's prefix. Each refusal is a
 * StartupError that names its flag.
 */
import { StartupError } from '../errors.js';

/**
 * The service's HTTP URL from `--host` and `--port` (or PIXIU_HOST and PIXIU_PORT).
 * @throws StartupError naming `--host` when it is not a host name or address, `--port`
 *   when it is 0
 */
export function hostUrl(host: string, port: number): URL {
  // 0 means "any free port" to `serve`; no service is reached at it.
  if (port === 0) throw new StartupError('--port 0 (or PIXIU_PORT=0) names no service to connect to: give the port the service listens on, or --url');
  try {
    return new URL(`http://${host.includes(':') ? `[${host}]` : host}:${port}`);
  } catch {
    throw new StartupError(`invalid --host ${JSON.stringify(host)} (or PIXIU_HOST): give a host name or address of the service, like 127.0.0.1 or pixiu.internal`);
  }
}

/**
 * The service's HTTP URL from `--url`: http(s), or ws(s) for the same service.
 * @throws StartupError for text that is not such a URL
 */
export function serviceUrl(text: string): URL {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new StartupError(`invalid --url ${JSON.stringify(text)}: give the service's URL, like http://127.0.0.1:8080`);
  }
  const secure = url.protocol === 'https:' || url.protocol === 'wss:';
  if (!secure && url.protocol !== 'http:' && url.protocol !== 'ws:') {
    throw new StartupError(`invalid --url ${JSON.stringify(text)}: the scheme must be http, https, ws or wss`);
  }
  // The connection's parameters come from the options; a query here would be dropped.
  if (url.search !== '' || url.hash !== '') {
    throw new StartupError(`invalid --url ${JSON.stringify(text)}: give it without a query or fragment (use --device, --last-seq, --epoch, --from-latest)`);
  }
  url.protocol = secure ? 'https:' : 'http:';
  return url;
}

/**
 * The path of a route (`/v1/connect`) under the service URL's path, which is a prefix
 * (a reverse proxy's): `http://h/pixiu/` and `http://h/pixiu` both give `/pixiu/v1/connect`.
 */
export function routePath(service: URL, route: string): string {
  return `${service.pathname.replace(/\/+$/, '')}${route}`;
}
