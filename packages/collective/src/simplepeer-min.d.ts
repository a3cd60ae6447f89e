// The browser bundle of simple-peer (the main entry needs Node's `global` under Vite); same API.
declare module 'simple-peer/simplepeer.min.js' {
  import SimplePeer from 'simple-peer';
  export default SimplePeer;
}
