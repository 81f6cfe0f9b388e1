// The Java client's side of the chaos run (tests/cluster/chaos/twins.rs),
// run as a single-file source program on the broker's classpath
// (`scripts/apache-pulsar classpath`). It does on its own topic what the
// run's pulsar-wire twin does on another, through the same fault proxy and
// under the same faults:
//
//   ChaosPeer URL TOPIC SECONDS IN_FLIGHT IDLE_SECONDS
//
// One producer sends "m-<n>" for SECONDS with at most IN_FLIGHT sends
// waiting for receipts (send timeout 600 s, batching on, the defaults
// otherwise); two Shared consumers on subscription "t", each on a client
// of its own, with ack receipts, ack every message. Once every send is
// answered it waits until every confirmed message was received, or
// IDLE_SECONDS pass without a delivery, then prints one line:
//
//   RESULT confirmed=C consumed=U deliveries=D lost=L
//
// consumed: confirmed messages received at least once; deliveries: every
// message received, copies included; lost: confirmed and never received.

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.pulsar.client.api.Consumer;
import org.apache.pulsar.client.api.Message;
import org.apache.pulsar.client.api.Producer;
import org.apache.pulsar.client.api.PulsarClient;
import org.apache.pulsar.client.api.SubscriptionInitialPosition;
import org.apache.pulsar.client.api.SubscriptionType;

public class ChaosPeer {
    static final ConcurrentHashMap<Long, AtomicInteger> received = new ConcurrentHashMap<>();
    static final AtomicLong deliveries = new AtomicLong();
    static final AtomicLong lastDelivery = new AtomicLong(System.nanoTime());
    /// Distinct messages received, and a monitor told of each delivery.
    static final AtomicLong distinct = new AtomicLong();
    static final Object delivered = new Object();
    static final AtomicBoolean stop = new AtomicBoolean();

    public static void main(String[] args) throws Exception {
        String url = args[0];
        String topic = args[1];
        long seconds = Long.parseLong(args[2]);
        int inFlight = Integer.parseInt(args[3]);
        long idleSeconds = Long.parseLong(args[4]);
        PulsarClient first = PulsarClient.builder().serviceUrl(url).build();
        PulsarClient second = PulsarClient.builder().serviceUrl(url).build();
        List<Consumer<byte[]>> consumers = List.of(subscribe(first, topic), subscribe(second, topic));
        List<Thread> threads = new ArrayList<>();
        for (Consumer<byte[]> consumer : consumers) {
            Thread thread = new Thread(() -> consume(consumer));
            thread.start();
            threads.add(thread);
        }

        Set<Long> confirmed = ConcurrentHashMap.newKeySet();
        Producer<byte[]> producer = first.newProducer()
                .topic(topic)
                .sendTimeout(600, TimeUnit.SECONDS)
                .create();
        Semaphore room = new Semaphore(inFlight);
        List<CompletableFuture<?>> sends = new ArrayList<>();
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
        for (long n = 0; System.nanoTime() < deadline; n++) {
            long number = n;
            room.acquire();
            CompletableFuture<?> send = producer.sendAsync(("m-" + n).getBytes(StandardCharsets.UTF_8))
                    .handle((id, error) -> {
                        if (error == null) {
                            confirmed.add(number);
                        }
                        room.release();
                        return null;
                    });
            sends.add(send);
        }
        CompletableFuture.allOf(sends.toArray(new CompletableFuture[0])).join();
        producer.close();

        long idle = TimeUnit.SECONDS.toMillis(idleSeconds);
        synchronized (delivered) {
            while (!(distinct.get() >= confirmed.size()
                    && confirmed.stream().allMatch(received::containsKey))) {
                long quiet = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - lastDelivery.get());
                if (quiet >= idle) {
                    break;
                }
                delivered.wait(idle - quiet);
            }
        }
        stop.set(true);
        for (Thread thread : threads) {
            thread.join();
        }
        for (Consumer<byte[]> consumer : consumers) {
            consumer.close();
        }
        first.close();
        second.close();

        long consumed = confirmed.stream().filter(received::containsKey).count();
        System.out.printf("RESULT confirmed=%d consumed=%d deliveries=%d lost=%d%n",
                confirmed.size(), consumed, deliveries.get(), confirmed.size() - consumed);
        System.exit(0);
    }

    static Consumer<byte[]> subscribe(PulsarClient client, String topic) throws Exception {
        return client.newConsumer()
                .topic(topic)
                .subscriptionName("t")
                .subscriptionType(SubscriptionType.Shared)
                .subscriptionInitialPosition(SubscriptionInitialPosition.Earliest)
                .isAckReceiptEnabled(true)
                .subscribe();
    }

    /// Receives and acks until told to stop; a failed receive or ack (a
    /// fault under way) is passed over, as the run's own roles do.
    static void consume(Consumer<byte[]> consumer) {
        while (!stop.get()) {
            Message<byte[]> message;
            try {
                message = consumer.receive(200, TimeUnit.MILLISECONDS);
            } catch (Exception e) {
                continue;
            }
            if (message == null) {
                continue;
            }
            String body = new String(message.getData(), StandardCharsets.UTF_8);
            long number = Long.parseLong(body.substring(2));
            if (received.computeIfAbsent(number, n -> new AtomicInteger()).incrementAndGet() == 1) {
                distinct.incrementAndGet();
            }
            deliveries.incrementAndGet();
            lastDelivery.set(System.nanoTime());
            synchronized (delivered) {
                delivered.notifyAll();
            }
            consumer.acknowledgeAsync(message);
        }
    }
}
