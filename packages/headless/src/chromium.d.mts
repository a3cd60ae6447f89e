export declare const CHROMIUM_PATH: string;
export declare const CHROMIUM_ARGS: string[];
export declare function launchSharedBrowser(): Promise<import('playwright-core').BrowserServer>;
