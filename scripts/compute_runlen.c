// Run-length variance of a fixed compute burst (scripts/compute_runlen.py): the same work (a
// dependent xorshift chain of ITER steps) timed N times with CLOCK_MONOTONIC; prints each burst in ns.
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <time.h>
static inline uint64_t now(void){struct timespec t; clock_gettime(CLOCK_MONOTONIC,&t); return t.tv_sec*1000000000ull+t.tv_nsec;}
int main(int c, char**v){ long iter=atol(v[1]); long n=atol(v[2]); uint64_t x=88172645463325252ull; 
 uint64_t *d=malloc(n*8);
 for(long i=0;i<n;i++){ uint64_t t0=now(); for(long k=0;k<iter;k++){x^=x<<13;x^=x>>7;x^=x<<17;} uint64_t t1=now(); d[i]=t1-t0; }
 for(long i=0;i<n;i++) printf("%lu\n",d[i]); fprintf(stderr,"%lu\n",x); return 0;}
