// <tabfleet-contribute>: the contribute button any site may place, built to /embed/tabfleet.js:
//   <script type="module" src="https://server/embed/tabfleet.js"></script>
//   <tabfleet-contribute server="https://server"></tabfleet-contribute>
// (`server` defaults to where the script came from; `job` asks for one job.)
//
// An iframe from the server's origin (apps/embed/index.html), not the volunteer code run directly on
// the embedding page: the engine Web Worker, WebGPU, the Socket.IO session and this browser's
// volunteer id then stay on the server's origin, so no CORS on checkpoints, shards or the worker
// script, no embedding page's CSP to fight, no globals shared with its scripts, and that page can
// neither read the id nor click Contribute for the visitor (the click must be a real one inside the
// frame). The server lists the sites that may frame it (CSP frame-ancestors, from --allow-origin).
//
// Before the frame, this element asks the server (GET /api/public/embed, readable from any origin)
// whether this page's origin may embed it, so a site not allowed shows why instead of a blank box
// (the browser would refuse the frame anyway). Nothing here imports the apps' code: the script
// stays one small file, and nothing runs until the visitor presses Contribute inside the frame.

const STYLE = `
  :host { display: block; max-width: 40rem; font: 14px/1.4 system-ui, sans-serif; }
  iframe { display: block; width: 100%; height: 22rem; border: 1px solid #30363d; border-radius: 6px; background: #0d1117; }
  p { margin: 0; padding: 0.8rem 1rem; border: 1px solid #30363d; border-radius: 6px; }
  :host([data-state='refused']) p, :host([data-state='unreachable']) p { border-color: #8e3b3b; }`;

/** What the frame may tell its embedder (the frame's own height, so no scroll bar cuts it). */
interface FrameMessage {
  tabfleet: 'height';
  px: number;
}

class TabfleetContribute extends HTMLElement {
  private readonly root = this.attachShadow({ mode: 'open' });
  private frame: HTMLIFrameElement | null = null;
  private readonly onMessage = (e: MessageEvent<FrameMessage>) => {
    if (!this.frame || e.source !== this.frame.contentWindow || e.data?.tabfleet !== 'height') return;
    if (Number.isFinite(e.data.px) && e.data.px > 0) this.frame.style.height = `${Math.min(Math.ceil(e.data.px), 2000)}px`;
  };

  connectedCallback(): void {
    addEventListener('message', this.onMessage);
    if (!this.frame && this.dataset.state !== 'checking') void this.show();
  }

  disconnectedCallback(): void {
    removeEventListener('message', this.onMessage);
  }

  private say(state: 'checking' | 'refused' | 'unreachable', text: string): void {
    this.dataset.state = state;
    this.root.innerHTML = `<style>${STYLE}</style><p part="message" role="status"></p>`;
    this.root.querySelector('p')!.textContent = text;
  }

  private async show(): Promise<void> {
    let server: URL;
    try {
      server = new URL(this.getAttribute('server') ?? new URL(import.meta.url).origin);
    } catch {
      this.say('unreachable', `tabfleet: the server attribute ${JSON.stringify(this.getAttribute('server'))} is not a URL (want https://server).`);
      return;
    }
    this.say('checking', `Asking the tabfleet server at ${server.host} whether this site may offer contributing…`);
    const answer = await fetch(new URL('/api/public/embed', server), { credentials: 'omit' })
      .then((r) => (r.ok ? (r.json() as Promise<{ allowed: boolean; server: { name: string } }>) : Promise.reject(new Error(`HTTP ${r.status}`))))
      .catch((e: Error) => e);
    if (answer instanceof Error) {
      this.say('unreachable', `Contributing is not available: the tabfleet server at ${server.host} did not answer (${answer.message}).`);
      return;
    }
    if (!answer.allowed) {
      this.say('refused', `Contributing is not available here: the tabfleet server “${answer.server.name}” does not allow this site (${location.origin}) ` +
        `to embed it. Site owner: its operator adds sites with --allow-origin ${location.origin}.`);
      return;
    }
    const src = new URL('/apps/embed/', server);
    const job = this.getAttribute('job');
    if (job) src.searchParams.set('job', job);
    this.frame = document.createElement('iframe');
    this.frame.src = src.href;
    this.frame.title = `Contribute this tab's GPU to ${answer.server.name}`;
    this.root.innerHTML = `<style>${STYLE}</style>`;
    this.root.append(this.frame);
    this.dataset.state = 'ready';
  }
}

if (!customElements.get('tabfleet-contribute')) customElements.define('tabfleet-contribute', TabfleetContribute);
