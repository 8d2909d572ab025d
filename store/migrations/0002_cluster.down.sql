DROP TABLE gaffer.leader_fence;
DROP TABLE gaffer.nodes;
