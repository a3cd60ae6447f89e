export declare function canMeasureProcessCpu(): boolean;
export declare function treeCpuSeconds(roots: number[]): number[];
