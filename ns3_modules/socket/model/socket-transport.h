/*
 * HeteroSim: NCCL's socket transport (net_socket.cc) over ns-3's TCP on the packet fabric.
 */
#ifndef HETEROSIM_SOCKET_TRANSPORT_H
#define HETEROSIM_SOCKET_TRANSPORT_H

#include "fabric-ip-device.h"

#include "ns3/callback.h"
#include "ns3/ipv4-address.h"
#include "ns3/net-device-queue-interface.h"
#include "ns3/node.h"
#include "ns3/nstime.h"
#include "ns3/object.h"
#include "ns3/packet.h"
#include "ns3/qbb-net-device.h"
#include "ns3/rdma-frame-pool.h"
#include "ns3/socket.h"
#include "ns3/tcp-header.h"
#include "ns3/tcp-socket-base.h"
#include "ns3/tcp-socket-state.h"
#include "ns3/topology-description.h"
#include "ns3/traced-callback.h"

#include <cstdint>
#include <deque>
#include <string>
#include <unordered_map>
#include <vector>

namespace ns3
{

/**
 * \brief NCCL's socket transport between hosts, carried by ns-3's own TCP (TcpSocketBase with
 * a real congestion control) over the packet network's devices and switches.
 *
 * Stack: every NIC node that carries socket traffic gets ns-3's internet stack (IPv4, static
 * routing, TCP) and a FabricIpDevice with the address 10.0.0.0/8 + node + 1. IPv4 packets leave
 * as RdmaFrame::IP frames on the NIC's fabric port (priority TcpPriority; wire bytes = IP packet +
 * 18 bytes of Ethernet header and FCS, at least 64, + 20 bytes preamble and inter-frame gap
 * when the network counts them), are forwarded by destination host with ECMP over a hash of
 * the TCP connection's ports, queue in the switches' shared buffers, and may be ECN-marked or
 * dropped there (with PFC on, PacketNetwork keeps the TCP priority lossy through
 * SwitchMmu::LossyPriorities unless TcpLossless is true). Each host interface has a queue disc
 * (HostQueueDisc, FqCoDel by default as systemd configures Linux) in front of the NIC's
 * transmit ring; the ring takes TcpTxQueueBytes and then stops the queue disc until it drains
 * (flow control as with Linux's byte queue limits), so a host drops or marks only where its
 * queue disc decides to. A CE mark reaches TCP only for
 * ECN-capable packets (DCTCP); for Not-ECT packets the switch's marker is bypassed, as an
 * ECN-only switch configuration leaves them unmarked. With HostQueueDisc none the ring is a
 * drop-tail queue of TcpTxQueueBytes instead.
 *
 * NCCL semantics (src/transport/net_socket.cc, NCCL master: ncclNetSocketGetNsockNthread,
 * MIN_CHUNKSIZE and the request split in ncclNetSocketProgressSize; older releases auto-detect
 * 1 thread x 1 socket instead of 0 x 1): a NCCL connection between two
 * GPUs is nSocks + 1 TCP connections, nSocks = NCCL_SOCKET_NTHREADS x NCCL_NSOCKS_PERTHREAD
 * (SocketNthreads x NsocksPerThread; NCCL caps threads at 16 and sockets at 64) plus the control
 * socket. NCCL's auto-detection gives 0 threads (nSocks = 0) except on AWS (2 x 8) and GCP
 * (4 x 1) NICs, so the default here is 0 x 1. Every message of the connection is sent as
 * requests of at most RequestBytes (NCCL posts one isend per pipeline step: NCCL_BUFFSIZE 4 MiB
 * / NCCL_STEPS 8 = 512 KiB for the Simple protocol); each request sends its 4-byte size on the
 * control socket, then either its payload on the control socket (nSocks = 0) or splits it
 * into tasks of max(MinChunkSize = MIN_CHUNKSIZE 64 KiB, ceil(size / nSocks)) bytes handed to
 * the data sockets round-robin, continuing where the previous request stopped. A message is
 * delivered when the receiver has read every byte of all its requests (and their headers),
 * plus the host latency after the NIC that PacketNetwork passes in.
 *
 * Approximations: the TCP connections are opened on a NCCL connection's first message, so that
 * message pays the three-way handshake that NCCL pays at communicator set-up; host CPU cost
 * (threads, copies, interrupts) is not modelled, so a thread only adds sockets; the proxy's
 * NCCL_STEPS window is not enforced (the socket buffers, TcpSndBufSize and TcpRcvBufSize, bound the
 * bytes in flight instead); ns-3's TCP has no receive-buffer auto-tuning, so the buffers are
 * fixed at Linux's tcp_wmem / tcp_rmem maxima by default; messages between the same two GPUs
 * without a connection id share one NCCL connection; on an RDMA host that also talks TCP (to a
 * socket host), TCP frames queued at the NIC port go before the queue pairs, which the NIC only
 * pulls onto an idle port; switches serve the TCP and RDMA classes frame by frame round-robin
 * (QbbNetDevice), not by bytes; the newest sources' extra peer-ACK socket
 * (NCCL_SOCKET_PEER_ACK) is not modelled; the congestion window is not restarted after idle
 * (Linux's tcp_slow_start_after_idle). Receivers ACK every second segment or after the fixed
 * TcpDelAckTimeout, Linux's smallest delayed-ACK timeout (Linux adapts it up to 200 ms and ACKs
 * at once after an idle gap longer than the RTO, tcp_event_data_recv's quick-ACK mode; ns-3
 * does neither). It must stay below TcpMinRto: ns-3's RTO is max(MinRto, srtt + 4 rttvar), not
 * Linux's srtt + max(rto_min, 4 rttvar), so with ns-3's own 200 ms delayed-ACK timeout a
 * message's last lone segment waits for the sender's RTO, which cuts the window to one segment
 * (kept there when ns-3 leaves CA_LOSS), and each later segment again waits for the RTO.
 */
class SocketTransport : public Object
{
  public:
    /** Message delivered: flow id. */
    typedef Callback<void, uint32_t> MessageDoneCallback;
    /** Trace signature of Cwnd: stream, old and new congestion window in bytes. */
    typedef void (*CwndTracedCallback)(uint32_t, uint32_t, uint32_t);
    /** Trace signature of Retransmission / LossEvent: stream. */
    typedef void (*StreamTracedCallback)(uint32_t);

    /**
     * \brief Get the type ID.
     * \return the object TypeId
     */
    static TypeId GetTypeId();

    SocketTransport();
    ~SocketTransport() override;

    /**
     * \brief Attach to a built packet network.
     * \param desc topology
     * \param nodes ns-3 node per topology node
     * \param nodePorts global port indices of every node (port 2l / 2l+1: link l's ends)
     * \param portDev device of every global port
     * \param pool frame allocator of the network
     * \param seed ECMP seed
     * \param ecmp spread TCP connections over equal-cost paths
     * \param phyBytes preamble + inter-frame gap counted per frame (0 or 20)
     * \param done called when a message has been delivered
     */
    void Setup(Ptr<TopologyDescription> desc,
               const std::vector<Ptr<Node>>& nodes,
               const std::vector<std::vector<uint32_t>>& nodePorts,
               const std::vector<Ptr<QbbNetDevice>>& portDev,
               RdmaFramePool* pool,
               uint32_t seed,
               bool ecmp,
               uint32_t phyBytes,
               MessageDoneCallback done);

    /**
     * \brief Send a message from NIC \p srcNode to NIC \p dstNode on a NCCL connection.
     * \param flowId caller's id, reported back when delivered
     * \param srcGpu sending GPU
     * \param dstGpu receiving GPU
     * \param srcNode NIC node of the sender
     * \param dstNode NIC node of the receiver
     * \param bytes payload bytes (> 0)
     * \param connection caller's connection id, or -1 (one connection per GPU pair)
     * \param srcDelayNs latency before the NIC on the sending host
     * \param dstDelayNs latency after the NIC on the receiving host
     */
    void Send(uint32_t flowId,
              uint32_t srcGpu,
              uint32_t dstGpu,
              uint32_t srcNode,
              uint32_t dstNode,
              uint64_t bytes,
              int64_t connection,
              int64_t srcDelayNs,
              int64_t dstDelayNs);

    /**
     * \brief An IP frame arrived at endpoint \p node (the RDMA endpoints' IP hook, which the
     * packet network points here).
     * \param frame the frame (the endpoint frees it afterwards)
     * \param node topology node of the endpoint
     */
    void ReceiveFrame(const RdmaFrame* frame, uint32_t node);

    /** \return the traffic class of TCP frames */
    uint8_t GetPriority() const;
    /** \return whether the TCP class is lossless (PFC) */
    bool IsLossless() const;
    /** \return sockets per NCCL connection carrying data (0: the control socket carries it) */
    uint32_t GetDataSockets() const;

    /** \return whether \p flowId is a message of this transport */
    bool HasFlow(uint32_t flowId) const;
    /**
     * \brief Counters of one message. Retransmissions and loss events (RTO) are those of the
     * message's connection, reported on the connection's first message only.
     * \param flowId the message
     * \param retransmits segments sent again
     * \param timeouts retransmission timeouts
     * \param delivered payload bytes delivered (all, once the message is done)
     */
    void GetFlowStats(uint32_t flowId,
                      uint64_t* retransmits,
                      uint64_t* timeouts,
                      uint64_t* delivered) const;

    /** \return TCP segments retransmitted, all connections */
    uint64_t GetRetransmits() const;
    /** \return retransmission timeouts, all connections */
    uint64_t GetTimeouts() const;
    /** \return fast recoveries entered, all connections */
    uint64_t GetRecoveries() const;
    /** \return packets dropped at a NIC's full transmit queue */
    uint64_t GetHostDrops() const;
    /** \return CE marks delivered to TCP receivers */
    uint64_t GetCeDelivered() const;
    /** \return IP frames lost in the fabric (switch drops) */
    uint64_t GetFabricDrops() const;
    /** \return messages delivered */
    uint64_t GetMessagesDone() const;
    /** \return payload bytes delivered by finished messages */
    uint64_t GetBytesDelivered() const;

    /** \return number of TCP connections (streams) opened */
    uint32_t GetNStreams() const;
    /**
     * \brief Copy per-stream statistics (arrays of GetNStreams() entries).
     * \param firstFlow first message of the stream's NCCL connection
     * \param srcNode sending NIC node
     * \param dstNode receiving NIC node
     * \param socket 0 = control socket, 1..nSocks = data sockets
     * \param bytes bytes written to the stream
     * \param received bytes read by the receiver
     * \param maxCwnd largest congestion window, bytes
     * \param lastCwnd congestion window at the end, bytes
     * \param retransmits segments retransmitted
     * \param timeouts retransmission timeouts
     * \param recoveries fast recoveries
     */
    void CopyStreamStats(uint32_t* firstFlow,
                         uint32_t* srcNode,
                         uint32_t* dstNode,
                         uint32_t* socket,
                         uint64_t* bytes,
                         uint64_t* received,
                         uint32_t* maxCwnd,
                         uint32_t* lastCwnd,
                         uint64_t* retransmits,
                         uint64_t* timeouts,
                         uint64_t* recoveries) const;
    /**
     * \brief Append one progress sample of every message in flight: (now, flow id, goodput in
     * bit/s since the message's previous sample, payload bytes received so far). A message's
     * bytes are what its connection's receivers read of its share of each socket's stream.
     * \param now sample time, ns
     * \param time sample times
     * \param flow flow ids
     * \param rate goodput, bit/s
     * \param received bytes received
     */
    void AppendProgress(int64_t now,
                        std::vector<int64_t>& time,
                        std::vector<uint32_t>& flow,
                        std::vector<double>& rate,
                        std::vector<uint64_t>& received);
    /** \return number of congestion-window samples (CwndSampleInterval) */
    uint64_t GetNCwndSamples() const;
    /**
     * \brief Copy the congestion-window series (CwndSampleInterval).
     * \param timeNs time of the change
     * \param stream the stream
     * \param cwnd new congestion window, bytes
     */
    void CopyCwndSeries(int64_t* timeNs, uint32_t* stream, uint32_t* cwnd) const;

  protected:
    void DoDispose() override;

  private:
    /** One TCP connection of a NCCL connection. */
    struct Stream
    {
        uint32_t conn{0};     //!< NCCL connection
        uint32_t socket{0};   //!< 0 = control, else data socket index + 1
        Ptr<Socket> tx;       //!< sender's socket
        Ptr<Socket> rx;       //!< receiver's accepted socket
        uint64_t queued{0};   //!< bytes the application asked to send
        uint64_t written{0};  //!< bytes handed to the sender's socket
        uint64_t received{0}; //!< bytes read by the receiver
        std::deque<std::pair<uint64_t, uint32_t>> marks; //!< (stream end offset, request)
        uint32_t cwnd{0};                                //!< congestion window now
        uint32_t maxCwnd{0};                             //!< largest congestion window
        uint64_t retransmits{0};                         //!< segments retransmitted
        uint64_t timeouts{0};                            //!< RTOs (entries into CA_LOSS)
        uint64_t recoveries{0};                          //!< entries into CA_RECOVERY
        int64_t lastSampleNs{-1};                        //!< last cwnd sample, ns
    };

    /** One NCCL connection: control socket + data sockets. */
    struct Conn
    {
        uint32_t srcNode{0};           //!< sending NIC node
        uint32_t dstNode{0};           //!< receiving NIC node
        uint32_t firstFlow{0};         //!< first message
        std::vector<uint32_t> streams; //!< stream 0 = control
        uint32_t nextSock{0};          //!< next data socket for a task (NCCL's comm->nextSock)
    };

    /** A message in flight. */
    struct Message
    {
        uint32_t flowId{0};         //!< caller's id
        uint32_t conn{0};           //!< connection
        uint32_t requests{0};       //!< requests not yet received
        uint64_t bytes{0};          //!< payload
        int64_t dstDelayNs{0};      //!< host latency after the NIC
        std::vector<uint64_t> from; //!< per stream of the connection: first offset of this message
        std::vector<uint64_t> to;   //!< per stream: offset after this message
        uint64_t lastBytes{0};      //!< received at the previous progress sample
        int64_t lastNs{-1};         //!< time of the previous progress sample
    };

    /** A request (one isend) in flight. */
    struct Request
    {
        uint32_t message{0}; //!< its message
        uint32_t parts{0};   //!< marks not yet reached by the receiver
    };

    /** Per-flow record kept for statistics. */
    struct FlowRecord
    {
        uint32_t conn{0};  //!< connection
        uint64_t bytes{0}; //!< payload
        bool first{false}; //!< the connection's first message
        bool done{false};  //!< delivered
    };

    /** Install the internet stack and the fabric interface on NIC node \p node (once). */
    void EnsureStack(uint32_t node);
    /** \return the connection for the key, opening its sockets if new */
    uint32_t OpenConnection(uint64_t key, uint32_t flowId, uint32_t srcNode, uint32_t dstNode);
    /** Create and connect one stream of connection \p conn. */
    uint32_t OpenStream(uint32_t conn, uint32_t socketIndex);
    /** Write message \p msg's requests into its connection's streams. */
    void Post(uint32_t msg, uint64_t bytes);
    /** Append \p bytes of request \p req to stream \p s. */
    void Append(uint32_t s, uint64_t bytes, uint32_t req);
    /** Hand queued bytes of stream \p s to its socket while it has room. */
    void Fill(uint32_t s);
    /** Report message \p flowId delivered. */
    void Deliver(uint32_t flowId);
    /** The receiver reached a mark of request \p req. */
    void PartDone(uint32_t req);
    /** IPv4 packet from a FabricIpDevice to the fabric. */
    bool Transmit(Ptr<FabricIpDevice> dev, Ptr<Packet> packet);
    /** Port \p port dropped a frame (IP frames: forget their packet; wake a drained ring). */
    static void FrameDropped(SocketTransport* self, uint32_t port, const RdmaFrame* frame);
    /** A frame left port \p port of socket node \p node: wake its queue disc if the ring drained.
     */
    static void PortDequeued(SocketTransport* self,
                             uint32_t node,
                             uint32_t port,
                             const RdmaFrame* frame,
                             uint64_t bytes);
    /** Sender socket has room. */
    void SendSpace(Ptr<Socket> socket, uint32_t available);
    /** Receiver socket has data. */
    void Readable(Ptr<Socket> socket);
    /** A connection was accepted at a listener. */
    void Accepted(Ptr<Socket> socket, const Address& from);
    /** \return the address of NIC node \p node */
    static Ipv4Address AddressOf(uint32_t node);
    /** Congestion window of stream \p s changed. */
    static void CwndChanged(SocketTransport* self, uint32_t s, uint32_t oldCwnd, uint32_t newCwnd);
    /** Stream \p s retransmitted a segment. */
    static void Retransmitted(SocketTransport* self,
                              uint32_t s,
                              Ptr<const Packet> packet,
                              const TcpHeader& header,
                              const Address& local,
                              const Address& peer,
                              Ptr<const TcpSocketBase> socket);
    /** Congestion state of stream \p s changed. */
    static void CongStateChanged(SocketTransport* self,
                                 uint32_t s,
                                 TcpSocketState::TcpCongState_t oldState,
                                 TcpSocketState::TcpCongState_t newState);

    // attributes
    uint32_t m_nThreads;        //!< NCCL_SOCKET_NTHREADS
    uint32_t m_nSocksPerThread; //!< NCCL_NSOCKS_PERTHREAD
    uint32_t m_minChunk;        //!< MIN_CHUNKSIZE
    uint32_t m_requestBytes;    //!< bytes per isend
    std::string m_tcpType;      //!< TcpCongestionOps TypeId name
    uint32_t m_sndBuf;          //!< socket send buffer
    uint32_t m_rcvBuf;          //!< socket receive buffer
    uint16_t m_mtu;             //!< IP MTU
    Time m_minRto;              //!< TCP minimum RTO
    Time m_delAckTimeout;       //!< TCP delayed-ACK timeout
    uint32_t m_initialCwnd;     //!< initial window, segments
    uint8_t m_priority;         //!< traffic class of TCP frames
    bool m_lossless;            //!< PFC on the TCP class
    uint64_t m_txQueueBytes;    //!< NIC transmit ring bound
    std::string m_qdisc;        //!< host queue disc TypeId or none
    Time m_cwndInterval;        //!< cwnd series sampling (0 = off)

    Ptr<TopologyDescription> m_desc;                //!< topology
    std::vector<Ptr<Node>> m_nodes;                 //!< ns-3 node per topology node
    std::vector<std::vector<uint32_t>> m_nodePorts; //!< global ports per node
    std::vector<Ptr<QbbNetDevice>> m_portDev;       //!< device per global port
    RdmaFramePool* m_pool{nullptr};                 //!< frames
    uint32_t m_seed{1};                             //!< ECMP seed
    bool m_ecmp{true};                              //!< ECMP on
    uint32_t m_phy{0};                              //!< phy overhead per frame
    MessageDoneCallback m_done;                     //!< to the network

    std::vector<Ptr<FabricIpDevice>> m_dev;                 //!< per node (null: no stack)
    std::vector<Ptr<NetDeviceQueue>> m_txQueue;             //!< per node: flow control of its qdisc
    std::vector<Ptr<Socket>> m_listener;                    //!< per node
    std::unordered_map<uint64_t, Ptr<Packet>> m_inFlight;   //!< frame key -> packet
    uint64_t m_nextKey{1};                                  //!< next frame key
    std::unordered_map<uint64_t, uint32_t> m_connOf;        //!< connection key -> connection
    std::unordered_map<uint64_t, uint32_t> m_pendingAccept; //!< (src node, port) -> stream
    std::unordered_map<const Socket*, uint32_t> m_streamOf; //!< socket -> stream
    std::vector<Conn> m_conns;                              //!< connections
    std::vector<Stream> m_streams;                          //!< streams
    std::unordered_map<uint32_t, Message> m_messages;       //!< messages in flight
    uint32_t m_nextMessage{0};                              //!< next message id
    std::unordered_map<uint32_t, Request> m_requests;       //!< requests in flight
    uint32_t m_nextRequest{0};                              //!< next request id
    std::unordered_map<uint32_t, FlowRecord> m_flows;       //!< flow id -> record

    uint64_t m_retransmits{0};    //!< all streams
    uint64_t m_timeouts{0};       //!< all streams
    uint64_t m_recoveries{0};     //!< all streams
    uint64_t m_hostDrops{0};      //!< NIC transmit queue drops
    uint64_t m_fabricDrops{0};    //!< switch drops of IP frames
    uint64_t m_ceDelivered{0};    //!< CE marks handed to TCP
    uint64_t m_messagesDone{0};   //!< messages delivered
    uint64_t m_bytesDelivered{0}; //!< payload delivered

    std::vector<int64_t> m_cwTime;    //!< cwnd series: time
    std::vector<uint32_t> m_cwStream; //!< cwnd series: stream
    std::vector<uint32_t> m_cwValue;  //!< cwnd series: bytes

    TracedCallback<uint32_t, uint32_t, uint32_t> m_cwndTrace; //!< stream, old, new
    TracedCallback<uint32_t> m_retxTrace;                     //!< stream
    TracedCallback<uint32_t> m_timeoutTrace;                  //!< stream
};

} // namespace ns3

#endif /* HETEROSIM_SOCKET_TRANSPORT_H */
