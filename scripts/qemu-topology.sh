#!/bin/sh
# qemu-topology.sh: the QEMU -smp/-m/-numa arguments of every guest, from VM_MEM (2G) and
# VM_NODES. VM_NODES=2 (the default): two NUMA nodes, one CPU and half the memory each, as
# two sockets (one socket across two nodes makes the scheduler warn at boot). 1: one node.
set -eu
mem=${VM_MEM:-2G}
case $mem in *G) mib=$(( ${mem%G} * 1024 ));; *M) mib=${mem%M};; *) mib=$mem;; esac
case ${VM_NODES:-2} in
1) echo "-smp 2 -m $mem";;
2) half=$((mib / 2))
   echo "-smp 2,sockets=2,cores=1,threads=1 -m ${mib}M" \
	"-object memory-backend-ram,id=node0,size=${half}M -object memory-backend-ram,id=node1,size=$((mib - half))M" \
	"-numa node,nodeid=0,cpus=0,memdev=node0 -numa node,nodeid=1,cpus=1,memdev=node1";;
*) echo "qemu-topology.sh: VM_NODES must be 1 or 2" >&2; exit 2;;
esac
