#!/usr/bin/env python3
"""The copy sanity check of docs/retrieval.md section 5, run by hand (numpy only):
    python3 tests/reference/make_copy_check_db.py CHUNK_SIZE VOCAB OUT
writes OUT/db (a chunk database in retro-chunk's layout: 1,000 documents of 512 random ids, each odd
document a copy of the even one before), OUT/knn/neighbours.npy (neighbour 0 = the chunk's twin in the
copy, neighbour 1 random) and OUT/config.json (examples/configs/demo.json with num_tokens = VOCAB and
chunk_size = CHUNK_SIZE). Then: retro-train --db OUT/db --knn OUT/knn --config OUT/config.json ...
A model that reads its neighbours falls far below ln(VOCAB - 4); one that does not stays there."""
import numpy as np, json, os, sys
cs=int(sys.argv[1]); V=int(sys.argv[2]); out=sys.argv[3]
rng=np.random.default_rng(0); seq=256; docs=1000
rows=[];doc_ids=[];offs=[0];seqs=[];n=0
for d in range(docs):
    if d%2==0:
        L=512
        ids=[2]+list(rng.integers(4,V,L-2))+[3]
    arr=np.array(ids,dtype=np.int32).reshape(-1,cs)
    first=n
    for r in range(arr.shape[0]): rows.append(arr[r]); doc_ids.append(d)
    for r in range(0,arr.shape[0],seq//cs): seqs.append(first+r)
    n+=arr.shape[0]; offs.append(n)
os.makedirs(out+'/db',exist_ok=True); os.makedirs(out+'/knn',exist_ok=True)
np.save(out+'/db/chunks.npy',np.array(rows,dtype=np.int32)); np.save(out+'/db/doc_ids.npy',np.array(doc_ids,dtype=np.int64))
np.save(out+'/db/doc_offsets.npy',np.array(offs,dtype=np.int64)); np.save(out+'/db/seq_starts.npy',np.array(seqs,dtype=np.int64))
json.dump({"tool":"retro-chunk","parameters":{"chunk_size":cs,"seq_len":seq,"rows_per_seq":seq//cs},"outputs":[]},open(out+'/db/manifest.json','w'))
offs=np.array(offs); doc_ids=np.array(doc_ids)
knn=np.zeros((n,2),dtype=np.int64)
for c in range(n):
    d=doc_ids[c]; knn[c,0]=offs[d^1]+(c-offs[d]); knn[c,1]=rng.integers(0,n)
np.save(out+'/knn/neighbours.npy',knn)
cfg=json.load(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', 'examples', 'configs', 'demo.json'))); cfg['num_tokens']=V; cfg['chunk_size']=cs
json.dump(cfg,open(out+'/config.json','w'))
